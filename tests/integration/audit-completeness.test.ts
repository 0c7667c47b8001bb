import { expect, test } from "bun:test";
import { MetricReader } from "@opentelemetry/sdk-metrics";
import { sql } from "drizzle-orm";
import { AUDIT_DETAIL_KEYS, recordAudit, recordAuditLimited } from "../../src/audit/record.ts";
import { verifyChain } from "../../src/audit/verify-chains.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { withTransaction } from "../../src/db/operation.ts";
import { createTelemetry } from "../../src/telemetry/sdk.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { signedInTenant } from "../helpers/identity.ts";

// Issue #29: an audit row is never lost to a string cut inside a surrogate pair, and a row that
// cannot be written is counted in a metric (alert PlinthAuditWriteFailures), not only logged.
const app = useTestApp({ cache: "audit-completeness", settings: relaxedLimits });

const LONE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

test("every audited field takes long non-BMP strings: cut between characters, stored, and the chain verifies", async () => {
  const t = await signedInTenant(app);
  // for each length around the cuts (300 for details, 512 for the user agent), an emoji straddling it
  for (const pad of [298, 299, 300, 510, 511]) {
    const long = `${"x".repeat(pad)}${"😀".repeat(20)}`;
    const details = Object.fromEntries([...AUDIT_DETAIL_KEYS].map((key) => [key, long]));
    details.scopes = [long, long] as never;
    const ctx = { ...systemCtx("test", t.id), userAgent: long, clientRequestId: "c-1" };
    await withTransaction(app.deps, ctx, (tx, ctx) =>
      recordAudit(tx, ctx, { action: "user.created", target: { type: "user", id: long }, details }),
    );
  }
  const rows = await execute<{ details: Record<string, unknown>; user_agent: string }>(
    app.db,
    sql`select details, user_agent from audit_events where tenant_id = ${t.id} and action = 'user.created' and details ? 'clientRequestId' order by id`,
  );
  expect(rows).toHaveLength(5);
  for (const row of rows) {
    expect(LONE.test(row.user_agent)).toBe(false);
    expect(row.user_agent.length).toBeLessThanOrEqual(512);
    for (const value of Object.values(row.details).flat()) expect(LONE.test(String(value))).toBe(false);
  }
  const report = await withTransaction(app.deps, systemCtx("test", t.id), (tx) => verifyChain(tx, t.id));
  expect(report.broken).toBeNull();
});

test("a refusal of a long path ending in an emoji is an authorization.refused row", async () => {
  const t = await signedInTenant(app);
  const path = `/api/tenant/users/${"a".repeat(281)}${encodeURIComponent("😀")}`;
  const response = await app.request(path, { method: "DELETE", headers: t.member.headers });
  expect(response.status).toBe(403);
  const rows = await execute<{ details: { path: string } }>(
    app.db,
    sql`select details from audit_events where tenant_id = ${t.id} and action = 'authorization.refused'`,
  );
  expect(rows).toHaveLength(1);
  expect(LONE.test(rows[0]?.details.path ?? "")).toBe(false);
});

class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

test("an audit row of a refusal that cannot be written is counted in plinth.audit.write_failures", async () => {
  const reader = new TestReader();
  const telemetry = createTelemetry({ serviceName: "plinth", metricReaders: [reader] });
  const failures = async () => {
    const { resourceMetrics } = await reader.collect();
    return resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .filter((m) => m.descriptor.name === "plinth.audit.write_failures")
      .flatMap((m) => m.dataPoints.map((p) => ({ attributes: p.attributes, value: Number(p.value) })));
  };
  // served at 0 before any failure, so the alert has a series
  expect(await failures()).toEqual([{ attributes: {}, value: 0 }]);
  const deps = { ...app.deps, telemetry };
  // PostgreSQL refuses the row (a tenant id that is no uuid): the refusal's record fails
  const written = await recordAuditLimited(deps, systemCtx("test"), {
    action: "authorization.refused",
    outcome: "denied",
    tenantId: "not-a-uuid",
  });
  expect(written).toBe(false);
  expect(await failures()).toContainEqual({
    attributes: { "plinth.audit.action": "authorization.refused" },
    value: 1,
  });
  expect(app.logs.some((line) => line.includes("audit event not recorded"))).toBe(true);
  await telemetry.shutdown();
});
