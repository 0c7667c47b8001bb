import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { createTenant } from "../../src/tenancy/tenants.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant as createTenantRow } from "../helpers/identity.ts";

/**
 * A deleted tenant's code stays reserved for Tenancy:ReservedDays, judged by the injected clock as a
 * reserved hostname is (src/custom-domains/create-custom-domain.ts), not by the database's now().
 */
const DAY = 86_400_000;
const clock = new ManualClock(Date.now());
const app = useTestApp({ clock });

test("a reserved code is refused until the injected clock passes its reservation, then taken", async () => {
  const deleted = await createTenantRow(app.db);
  const code = `r${crypto.randomUUID().slice(0, 8)}`;
  const until = new Date(clock.nowMs() + DAY);
  await execute(
    app.db,
    sql`insert into tenant_reservations (kind, value, deleted_tenant_id, reserved_until)
        values ('code', ${code}, ${deleted.id}, ${until.toISOString()}::timestamptz)`,
  );
  const create = () => createTenant(app.deps, systemCtx("test"), { code, name: "Reused" });
  await expect(create()).rejects.toThrow("A tenant with this code exists.");
  clock.advance(2 * DAY);
  expect(await create()).toMatchObject({ code, status: "Active" });
});
