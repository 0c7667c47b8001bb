import { beforeAll, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { runSubscriptionBatch } from "../../src/billing/run-subscription-batch.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { subscriptions } from "../../src/db/schema/index.ts";
import type { Deps } from "../../src/deps.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant } from "../helpers/identity.ts";

const clock = new ManualClock("2026-11-10T12:00:00Z");
let deps: Deps;
const h = useTestApp({ clock });
const t = h.testDatabase;
beforeAll(() => {
  deps = h.deps;
});

async function endedUnpaid(updatedAt: Date): Promise<string> {
  const tenant = await createTenant(t.database.db);
  await t.database.db.insert(subscriptions).values({
    tenantId: tenant.id,
    planCode: "pro",
    status: "active",
    currentPeriodStart: new Date(clock.now().getTime() - 30 * 86_400_000),
    currentPeriodEnd: new Date(clock.now().getTime() - 1_000),
    updatedAt,
  });
  return tenant.id;
}

const statusOf = async (tenantId: string) =>
  (
    await t.database.db
      .select({ status: subscriptions.status })
      .from(subscriptions)
      .where(eq(subscriptions.tenantId, tenantId))
  )[0]?.status;

test("subscriptions that fail every time go to the back of the queue instead of starving the rest", async () => {
  const old = new Date(clock.now().getTime() - 3_600_000);
  const failing = [await endedUnpaid(old), await endedUnpaid(old)];
  const healthy = await endedUnpaid(new Date(clock.now().getTime() - 60_000));
  // a persistent failure for the first two (this database only): their history rows are refused
  await execute(
    t.database.db,
    sql.raw(`create function refuse_history() returns trigger language plpgsql as $$
      begin
        if new.tenant_id in ('${failing[0]}', '${failing[1]}') then raise exception 'refused for the test'; end if;
        return new;
      end $$`),
  );
  await execute(
    t.database.db,
    sql.raw(
      "create trigger refuse_history before insert on subscription_history for each row execute function refuse_history()",
    ),
  );
  const first = await runSubscriptionBatch(deps, systemCtx("test"), { batchSize: 2 });
  expect(first.changed).toHaveLength(0); // the two old ones, both failed
  const second = await runSubscriptionBatch(deps, systemCtx("test"), { batchSize: 2 });
  expect(second.changed.map((r) => r.subscription.tenantId)).toEqual([healthy]);
  expect(await statusOf(healthy)).toBe("past_due");
  for (const id of failing) expect(await statusOf(id)).toBe("active");
});
