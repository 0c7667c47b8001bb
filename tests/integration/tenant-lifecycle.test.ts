import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ListObjectsV2Command } from "@aws-sdk/client-s3";
import { sql } from "drizzle-orm";
import { create as createTar, extract } from "tar";
import { SESSION_CHANNEL } from "../../src/auth/session-cache.ts";
import { openTokenSession } from "../../src/auth/session-lookup.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { createDomainTicker } from "../../src/custom-domains/checks.ts";
import { createCustomDomain } from "../../src/custom-domains/create-custom-domain.ts";
import { type Db, execute } from "../../src/db/client.ts";
import { readTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { parseTenantSecretKeys } from "../../src/security/tenant-secrets.ts";
import { deleteTenantData } from "../../src/tenant-lifecycle/delete-tenant-data.ts";
import { NOT_IMPORTED } from "../../src/tenant-lifecycle/import-archive.ts";
import { quoteIdentifier, tenantTables } from "../../src/tenant-lifecycle/tenant-tables.ts";
import { type Manifest, writeTenantExport } from "../../src/tenant-lifecycle/write-export.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { S3_CREDENTIALS, s3Settings, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { createTestApp, relaxedLimits, testConfig, useTestApp, useTestDatabase } from "../helpers/app.ts";
import { domainSettings, publishRecords, uniqueHost } from "../helpers/domains.ts";
import { login, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";
import { runEntry } from "../helpers/process.ts";

// The issue's "done when": a tenant seeded across the tenant tables and both object prefixes is
// exported, deleted (interrupted half-way, then resumed), every table and prefix is scanned and
// holds nothing of it but the certificate, and the archive loads into a fresh database where the
// counts match and its users sign in.

const clock = new ManualClock("2026-11-20T10:00:00Z");
const sourceKey = randomBytes(32).toString("base64");
const targetKey = randomBytes(32).toString("base64");
let s3: TestS3;
let doh: DohServer;
let gateway: GatewayServer;
const scratch = mkdtempSync(join(tmpdir(), "plinth-lifecycle-test-"));
beforeAll(async () => {
  s3 = await startTestS3(clock, "plinth-lifecycle");
  doh = startDohServer();
  gateway = startGatewayServer();
});
afterAll(async () => {
  await s3.close();
  await doh.stop();
  await gateway.stop();
  rmSync(scratch, { recursive: true, force: true });
});
const h = useTestApp({
  clock,
  settings: () => ({
    ...relaxedLimits,
    ...s3Settings(s3),
    ...domainSettings(doh, gateway),
    "Security:TenantSecrets:KeyId": "ts-source",
    "Security:TenantSecrets:MasterKey": sourceKey,
  }),
});
const target = useTestDatabase();

const post = (headers: Record<string, string>, body: unknown) => ({
  method: "POST",
  headers: { ...headers, "content-type": "application/json" },
  body: JSON.stringify(body),
});

/** The tenant's rows per tenant table, as the catalog finds them. */
async function countsOf(db: Db, tenantId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of await tenantTables(db)) {
    const [row] = await execute<{ n: number }>(
      db,
      sql.raw(
        `select count(*)::int as n from ${quoteIdentifier(table.name)} t where ${table.where.replaceAll("$1", `'${tenantId}'`)}`,
      ),
    );
    out[table.name] = row?.n ?? 0;
  }
  return out;
}

/** Every row of every table whose text mentions the tenant id, by table. */
async function mentions(db: Db, tenantId: string): Promise<Record<string, number>> {
  const tables = await execute<{ name: string }>(
    db,
    sql`select relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind = 'r' order by 1`,
  );
  const out: Record<string, number> = {};
  for (const { name } of tables) {
    const [row] = await execute<{ n: number }>(
      db,
      sql.raw(`select count(*)::int as n from ${quoteIdentifier(name)} t where t::text like '%${tenantId}%'`),
    );
    if (row?.n) out[name] = row.n;
  }
  return out;
}

async function bucketKeys(): Promise<string[]> {
  const { client, bucket } = h.deps.storage?.bucket ?? { client: undefined, bucket: "" };
  if (!client) throw new Error("storage is configured here");
  const out = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
  return (out.Contents ?? []).map((o) => o.Key ?? "");
}

async function runExport(): Promise<string> {
  const [job] = await execute<{ payload: { exportId: string } }>(
    h.db,
    sql`select payload from background_jobs where kind = 'tenant.export' and status = 'pending' order by id desc limit 1`,
  );
  if (!job) throw new Error("no export job");
  await writeTenantExport(h.deps, systemCtx("test"), job.payload);
  return job.payload.exportId;
}

test("seed, export, delete (interrupted, resumed), scan, import into a fresh database: equal counts, working sign-in", async () => {
  // seed: users, memberships, sessions, refresh tokens, audit rows
  const tenant = await signedInTenant(h);
  const admin = await signedInPlatformAdmin(h);
  const owner = tenant.owner.headers;
  await h.deps.storage?.putObject(tenant.id, {
    key: "docs/contract.txt",
    body: new TextEncoder().encode("signed contract"),
    contentType: "text/plain",
  });
  expect(
    (
      await h.request(`/api/admin/tenants/${tenant.id}/secrets/payment.key`, {
        method: "PUT",
        headers: { ...admin.headers, "content-type": "application/json" },
        body: JSON.stringify({ value: "sk_live_lifecycle_0123456789" }),
      })
    ).status,
  ).toBe(204);
  expect(
    (await h.request("/api/tenant/api-keys", post(owner, { name: "ci", scopes: ["users:read"] }))).status,
  ).toBe(201);
  expect(
    (await h.request("/api/tenant/invitations", post(owner, { email: `inv${Date.now()}@example.com` })))
      .status,
  ).toBe(201);
  const domain = await createCustomDomain(h.deps, systemCtx("test", tenant.id), {
    hostname: uniqueHost("life"),
    forPlatform: true,
  });
  publishRecords(doh, domain);
  expect(await createDomainTicker(h.deps).tick()).toBe(1);
  expect(gateway.byHostname(domain.hostname)).toBeDefined();
  await execute(
    h.db,
    sql`with e as (insert into webhook_endpoints (tenant_id, url, events) values (${tenant.id}, 'https://hooks.example.com/x', '{*}') returning id),
             ev as (insert into webhook_events (tenant_id, type, data) values (${tenant.id}, 'webhook.test', '{}') returning id),
             d as (insert into webhook_deliveries (tenant_id, endpoint_id, event_id, status, attempts)
                   select ${tenant.id}, e.id, ev.id, 'failed', 1 from e, ev returning id)
        insert into webhook_delivery_attempts (delivery_id, attempt, status_code, duration_ms)
        select id, 1, 500, 12 from d`,
  );
  // a shared identity (a person who may belong to other tenants too) as a member, and a session a
  // platform admin opened as the owner (impersonation): rows that name what is not the tenant's
  const shared = `shared${Date.now()}@example.com`;
  await execute(
    h.db,
    sql`with u as (insert into users (pool, email, name, password_hash) values ('shared', ${shared}, 'Shared', 'x') returning id)
        insert into tenant_memberships (tenant_id, user_id, role) select ${tenant.id}, id, 'member' from u`,
  );
  await execute(
    h.db,
    sql`insert into sessions (user_id, tenant_id, expires_at, impersonator_id, impersonation_reason)
        values (${tenant.owner.id}, ${tenant.id}, now() + interval '1 hour', ${admin.id}, 'support')`,
  );
  // a first export by the owner: its archive is under the tenant-exports prefix
  expect((await h.request("/api/tenant/exports", { method: "POST", headers: owner })).status).toBe(202);
  await runExport();

  // the export the platform admin takes before deleting, secrets sealed to a passphrase
  const passphrase = "lifecycle passphrase of the test";
  expect(
    (
      await h.request(
        `/api/admin/tenants/${tenant.id}/exports`,
        post(admin.headers, { secretsPassphrase: passphrase }),
      )
    ).status,
  ).toBe(202);
  const before = await countsOf(h.db, tenant.id);
  const [sourceKeyRow] = await execute<{ key_id: string }>(
    h.db,
    sql`select key_id from tenant_data_keys where tenant_id = ${tenant.id}`,
  );
  const sourceDataKeyId = sourceKeyRow?.key_id;
  expect(sourceDataKeyId).toStartWith("tdk_");
  const exportId = await runExport();
  const view = (await (
    await h.request(`/api/admin/tenants/${tenant.id}/exports/${exportId}`, { headers: admin.headers })
  ).json()) as {
    downloadUrl: string;
    manifest: Manifest;
  };
  const archive = join(scratch, "tenant.tar.gz");
  writeFileSync(archive, Buffer.from(await (await fetch(view.downloadUrl)).arrayBuffer()));
  const seeded = Object.entries(before)
    .filter(([, n]) => n > 0)
    .map(([name]) => name);
  for (const name of [
    "tenants",
    "users",
    "tenant_memberships",
    "sessions",
    "refresh_tokens",
    "api_keys",
    "tenant_invitations",
    "tenant_domains",
    "tenant_secrets",
    "webhook_endpoints",
    "webhook_deliveries",
    "webhook_delivery_attempts",
    "audit_events",
    "audit_chains",
    "tenant_exports",
  ])
    expect(seeded).toContain(name);
  for (const file of view.manifest.tables)
    if (file.table !== "tenant_exports")
      expect([file.table, file.rows]).toEqual([file.table, before[file.table]]);

  // scheduled with a grace, canceled, scheduled again: the job does nothing until the grace ends
  const schedule = await h.request(
    `/api/admin/tenants/${tenant.id}/deletion`,
    post(admin.headers, { graceDays: 2 }),
  );
  expect(schedule.status).toBe(202);
  expect(
    (
      await h.request(`/api/admin/tenants/${tenant.id}/deletion`, {
        method: "DELETE",
        headers: admin.headers,
      })
    ).status,
  ).toBe(204);
  expect(await deleteTenantData(h.deps, systemCtx("test"), { tenantId: tenant.id })).toBe("not_scheduled");
  expect((await h.request(`/api/admin/tenants/${tenant.id}/deletion`, post(admin.headers, {}))).status).toBe(
    202,
  );
  expect(await deleteTenantData(h.deps, systemCtx("test"), { tenantId: tenant.id })).toBe("not_due");
  clock.advance((h.deps.config.settings.Tenancy.DeletionGraceDays * 86_400 + 60) * 1000);
  const later = await signedInPlatformAdmin(h); // the first one's token has long expired

  // a crash half-way (the signal fails the sixth batch), then the rerun completes
  let batches = 0;
  const crash = {
    throwIfAborted: () => {
      if (++batches > 5) throw new Error("killed");
    },
  } as unknown as AbortSignal;
  await expect(
    deleteTenantData(h.deps, systemCtx("test"), { tenantId: tenant.id, signal: crash }),
  ).rejects.toThrow("killed");
  const halfway = await countsOf(h.db, tenant.id);
  expect(halfway.tenants).toBe(1);
  expect(Object.values(halfway).some((n) => n > 0)).toBe(true);
  expect(
    (
      await h.request(`/api/admin/tenants/${tenant.id}/deletion`, {
        method: "DELETE",
        headers: later.headers,
      })
    ).status,
  ).toBe(404);
  expect(await deleteTenantData(h.deps, systemCtx("test"), { tenantId: tenant.id })).toBe("deleted");

  // nothing of it in any table or prefix but the platform's records of its deletion
  expect(Object.values(await countsOf(h.db, tenant.id)).every((n) => n === 0)).toBe(true);
  const left = await mentions(h.db, tenant.id);
  expect(Object.keys(left).sort()).toEqual(["audit_events", "background_jobs", "tenant_reservations"]);
  const audit = await execute<{
    action: string;
    tenant_id: string | null;
    details: { counts?: Record<string, number> };
  }>(
    h.db,
    sql`select action, tenant_id, details from audit_events t where t::text like ${`%${tenant.id}%`} order by id`,
  );
  expect(audit.every((row) => row.tenant_id === null)).toBe(true);
  expect(audit.map((row) => row.action)).toEqual([
    "tenant.deletion_scheduled",
    "tenant.deletion_canceled",
    "tenant.deletion_scheduled",
    "tenant.deleted",
  ]);
  const counts = audit.at(-1)?.details.counts ?? {};
  expect(audit.at(-1)?.details).toMatchObject({ dataKeyDestroyed: true, masterSealedValues: 0 });
  expect(counts.tenant_data_keys).toBe(1);
  expect(counts.users).toBe(3);
  expect(counts.tenants).toBe(1);
  expect(counts[`prefix:tenants/${tenant.id}/`]).toBe(1);
  expect(counts[`prefix:tenant-exports/${tenant.id}/`]).toBe(2);
  const jobs = await execute<{ kind: string }>(
    h.db,
    sql`select kind from background_jobs t where t::text like ${`%${tenant.id}%`}`,
  );
  expect(new Set(jobs.map((j) => j.kind))).toEqual(new Set(["tenant.delete"]));
  expect((await bucketKeys()).filter((key) => key.includes(tenant.id))).toEqual([]);
  expect(gateway.byHostname(domain.hostname)).toBeUndefined();
  // the shared identity is not the tenant's: it stays, without its membership
  expect((await execute(h.db, sql`select 1 from users where email = ${shared}`)).length).toBe(1);
  // its code and hostname stay reserved
  await expect(
    createCustomDomain(h.deps, systemCtx("test", (await signedInTenant(h)).id), {
      hostname: domain.hostname,
      forPlatform: true,
    }),
  ).rejects.toThrow("reserved");
  expect(
    (await h.request("/api/admin/tenants", post(later.headers, { code: tenant.code, name: "Taker" }))).status,
  ).toBe(409);

  // restore into a fresh database with other keys: the archive, checked, in one transaction
  const passphraseFile = join(scratch, "passphrase");
  writeFileSync(passphraseFile, `${passphrase}\n`);
  const env = {
    DATABASE_URL: target.url,
    PLINTH_TENANT_SECRET_KEY_ID: "ts-target",
    PLINTH_TENANT_SECRET_MASTER_KEY: targetKey,
    STORAGE_BUCKET: s3.bucket,
    STORAGE_ENDPOINT: s3.endpoint,
    STORAGE_REGION: "us-east-1",
    STORAGE_FORCE_PATH_STYLE: "true",
    STORAGE_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
    STORAGE_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
  };
  const run = await runEntry(
    "src/tenant-import.ts",
    [archive, "--passphrase-file", passphraseFile],
    env,
    60_000,
  );
  expect([run.exitCode, run.stderr + run.stdout].join(" ")).toStartWith("0 ");
  const restored = await countsOf(target.database.db, tenant.id);
  for (const file of view.manifest.tables)
    if (!NOT_IMPORTED.has(file.table))
      expect([file.table, restored[file.table]]).toEqual([file.table, file.rows]);
  const [member] = await execute<{ pool: string; password_hash: string | null }>(
    target.database.db,
    sql`select pool, password_hash from users where email = ${shared}`,
  );
  expect(member).toEqual({ pool: "shared", password_hash: null });
  const [impersonated] = await execute<{ impersonator_id: string | null }>(
    target.database.db,
    sql`select impersonator_id from sessions where impersonation_reason = 'support' and tenant_id = ${tenant.id}`,
  );
  expect(impersonated?.impersonator_id).toBeNull();
  const keyring = parseTenantSecretKeys({
    KeyId: "ts-target",
    MasterKey: targetKey,
    PreviousKeys: [],
  }).keyring;
  if (!keyring) throw new Error("the target keyring");
  // sealed under a data key the import made here (the source's was destroyed with the tenant)
  expect(await readTenantSecret(target.database.db, keyring, tenant.id, "payment.key")).toBe(
    "sk_live_lifecycle_0123456789",
  );
  const [dataKey] = await execute<{ key_id: string; wrapping_key_id: string }>(
    target.database.db,
    sql`select key_id, wrapping_key_id from tenant_data_keys where tenant_id = ${tenant.id}`,
  );
  expect(dataKey?.wrapping_key_id).toBe("ts-target");
  expect(dataKey?.key_id).not.toBe(sourceDataKeyId);
  expect((await bucketKeys()).filter((key) => key.startsWith(`tenants/${tenant.id}/`))).toEqual([
    `tenants/${tenant.id}/docs/contract.txt`,
  ]);
  const app2 = await createTestApp({
    database: target.database,
    config: testConfig({ settings: { ...relaxedLimits } }),
    clock,
  });
  try {
    const signIn = await login(app2, { email: tenant.owner.email, tenant: tenant.code });
    expect(signIn.status).toBe(200);
  } finally {
    await app2.close();
  }

  // the same archive again is refused (the tenant is there), and so is one altered by a byte
  const again = await runEntry(
    "src/tenant-import.ts",
    [archive, "--passphrase-file", passphraseFile],
    env,
    60_000,
  );
  expect(again.exitCode).toBe(2);
  expect(again.stdout + again.stderr).toContain("exists here");
  const unpacked = join(scratch, "unpacked");
  mkdirSync(unpacked);
  await extract({ file: archive, cwd: unpacked });
  appendFileSync(join(unpacked, "tables/users.ndjson"), "\n");
  const altered = join(scratch, "altered.tar.gz");
  await createTar({ gzip: true, file: altered, cwd: unpacked }, ["manifest.json", "tables", "objects"]);
  const refused = await runEntry("src/tenant-import.ts", [altered, "--as", "other-code"], env, 60_000);
  expect(refused.exitCode).toBe(2);
  expect(refused.stdout + refused.stderr).toContain("tables/users.ndjson does not match its SHA-256");
}, 120_000);

test("deleting a tenant ends its sessions: this process's cache at once, every other process's through plinth_sessions", async () => {
  const admin = await signedInPlatformAdmin(h);
  const tenant = await signedInTenant(h);
  const open = await openTokenSession(h.deps, tenant.member.accessToken);
  if ("refused" in open) throw new Error(open.refused);
  expect(h.deps.sessionCache.get(`s:${open.sessionId}`)).toBeDefined();
  const heard: string[] = [];
  const stop = await h.testDatabase.database.listen(SESSION_CHANNEL, (payload) => heard.push(payload));
  try {
    const schedule = await h.request(
      `/api/admin/tenants/${tenant.id}/deletion`,
      post(admin.headers, { graceDays: 0 }),
    );
    expect(schedule.status).toBe(202);
    expect(await deleteTenantData(h.deps, systemCtx("test"), { tenantId: tenant.id })).toBe("deleted");
    expect(h.deps.sessionCache.get(`s:${open.sessionId}`)).toBeUndefined();
    const notice = JSON.stringify({ tenantId: tenant.id });
    await waitFor(() => heard.includes(notice), { what: "the tenant's plinth_sessions notice" });
  } finally {
    await stop();
  }
});
