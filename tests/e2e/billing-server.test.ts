import { expect, test } from "bun:test";
import { and, eq, sql } from "drizzle-orm";
import { backgroundJobs, subscriptions } from "../../src/db/schema/index.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createTenant } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";
import { spawnBun } from "../helpers/processes.ts";

const t = useTestDatabase();

test("the API process runs the subscription and reconciliation loops and the billing notification job", async () => {
  const tenant = await createTenant(t.database.db);
  const now = Date.now();
  await t.database.db.insert(subscriptions).values({
    tenantId: tenant.id,
    planCode: "pro",
    status: "active",
    currentPeriodStart: new Date(now - 30 * 86_400_000),
    currentPeriodEnd: new Date(now - 1000),
  });
  const server = spawnBun(["src/server.ts"], { DATABASE_URL: t.url, PORT: "0", Database__PoolSize: "3" });
  try {
    const line = await server.waitForLine((l) => l.includes('"msg":"background loops started"'));
    expect((JSON.parse(line) as { running: string[] }).running.sort()).toEqual([
      "jobs",
      "schedules",
      "subscriptions",
      "tenantDomains",
      "usageReconciliation",
    ]);
    await waitFor(
      async () => {
        const [row] = await t.database.db
          .select()
          .from(subscriptions)
          .where(eq(subscriptions.tenantId, tenant.id));
        return row?.status === "past_due";
      },
      { what: "the subscription loop" },
    );
    await waitFor(
      async () => {
        const [job] = await t.database.db
          .select({ status: backgroundJobs.status })
          .from(backgroundJobs)
          .where(
            and(
              eq(backgroundJobs.kind, "billing.subscription_changed"),
              sql`${backgroundJobs.payload}->>'tenantId' = ${tenant.id}`,
            ),
          );
        return job?.status === "succeeded";
      },
      { what: "the notification job" },
    );
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
  } finally {
    if (server.proc.exitCode === null) server.proc.kill("SIGKILL");
  }
}, 30_000);
