/**
 * Audit log figures: what the chain costs.
 *  - one event in its own transaction: chained (`recordAudit`: the chain row's lock, the head, the
 *    hash, the row and the new head) against the peer, a plain INSERT of the same row with no chain;
 *  - many writers: one tenant (they queue on its chain row) against as many tenants as writers;
 *  - a password sign-in through the app (argon2id verify, the session, the tokens and its
 *    `auth.sign_in` event), and the share the event is of it.
 *
 *   bun bench/audit.ts [--events 3000] [--concurrency 16] [--signins 40]
 *
 * Needs PostgreSQL on 127.0.0.1:5432 (a scratch database, dropped at the end). Prints one table;
 * copy it into docs/performance.md.
 */
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { createApp } from "../src/app.ts";
import { GENESIS_HASH } from "../src/audit/chain.ts";
import { recordAudit } from "../src/audit/record.ts";
import { systemClock } from "../src/clock.ts";
import { systemCtx } from "../src/context.ts";
import { execute } from "../src/db/client.ts";
import { testConfig, testDeps } from "../tests/helpers/app.ts";
import { createTestDatabase } from "../tests/helpers/database.ts";
import { createTenant, createUser, PASSWORD } from "../tests/helpers/identity.ts";
import { drive } from "./stats.ts";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "3000" },
    concurrency: { type: "string", default: "16" },
    signins: { type: "string", default: "40" },
  },
});
const events = Number(values.events);
const concurrency = Number(values.concurrency);
const signins = Number(values.signins);

const t = await createTestDatabase({ poolSize: Math.min(concurrency + 2, 20) });
const deps = await testDeps(
  testConfig({
    settings: { "RateLimiting:Global:PermitLimit": "1000000", "RateLimiting:Auth:PermitLimit": "1000000" },
  }),
  { database: t.database, clock: systemClock },
);
const db = t.database.db;

const plainInsert = (tenantId: string, i: number) =>
  db.transaction((tx) =>
    execute(
      tx,
      sql`insert into audit_events (tenant_id, occurred_at, actor_type, actor_id, action, target_type, target_id, outcome, details, prev_hash, hash)
          values (${tenantId}, now(), 'system', 'bench', 'user.created', 'user', ${String(i)}, 'success', '{"role":"member"}'::jsonb, ${GENESIS_HASH}, ${GENESIS_HASH})`,
    ),
  );
const chained = (tenantId: string, i: number) =>
  db.transaction((tx) =>
    recordAudit(tx, systemCtx("bench", tenantId), {
      action: "user.created",
      target: { type: "user", id: String(i) },
      details: { role: "member" },
    }),
  );

try {
  const tenants: string[] = [];
  for (let i = 0; i < concurrency; i++) tenants.push((await createTenant(db)).id);
  const hot = tenants[0] as string;
  const rows: [string, Awaited<ReturnType<typeof drive>>][] = [];
  rows.push(["plain INSERT, 1 writer (peer)", await drive(events, 1, (i) => plainInsert(hot, i))]);
  rows.push(["recordAudit, 1 writer", await drive(events, 1, (i) => chained(hot, i))]);
  rows.push([
    `plain INSERT, ${concurrency} writers, 1 tenant (peer)`,
    await drive(events, concurrency, (i) => plainInsert(hot, i)),
  ]);
  rows.push([
    `recordAudit, ${concurrency} writers, 1 tenant`,
    await drive(events, concurrency, (i) => chained(hot, i)),
  ]);
  rows.push([
    `recordAudit, ${concurrency} writers, ${concurrency} tenants`,
    await drive(events, concurrency, (i) => chained(tenants[i % concurrency] as string, i)),
  ]);

  const tenant = await createTenant(db);
  const user = await createUser(db, tenant.id, { role: "owner" });
  const app = createApp(deps);
  const signIn = async () =>
    await app.request("/api/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: user.email, password: PASSWORD, tenant: tenant.code }),
    });
  await signIn();
  rows.push(["password sign-in (with its event), 1 client", await drive(signins, 1, signIn)]);

  console.log(`events per row: ${events}, concurrency: ${concurrency}, sign-ins: ${signins}`);
  console.log("| operation | ops/s | p50 ms | p95 ms | p99 ms |");
  console.log("| --- | --- | --- | --- | --- |");
  for (const [name, r] of rows)
    console.log(
      `| ${name} | ${r.perSecond} | ${r.p50.toFixed(2)} | ${r.p95.toFixed(2)} | ${r.p99.toFixed(2)} |`,
    );
  const [peer, one, , hotMany, spread, signin] = rows.map(([, r]) => r);
  if (peer && one && hotMany && spread && signin) {
    const eventCost = one.p50 - peer.p50;
    console.log(
      `\nchained vs plain, 1 writer: ${(one.perSecond / peer.perSecond).toFixed(2)}× the throughput, +${eventCost.toFixed(2)} ms p50 per event`,
    );
    console.log(
      `one tenant's ${concurrency} writers vs ${concurrency} tenants: ${(hotMany.perSecond / spread.perSecond).toFixed(2)}× the throughput (the chain row serialises one tenant)`,
    );
    console.log(
      `an event is ${((one.p50 / signin.p50) * 100).toFixed(1)}% of a sign-in's p50 (${one.p50.toFixed(2)} of ${signin.p50.toFixed(2)} ms)`,
    );
  }
} finally {
  await deps.cache?.close();
  await t.drop();
}
