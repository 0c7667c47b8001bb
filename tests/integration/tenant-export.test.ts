import { beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { extract } from "tar";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { deriveArchiveKey, openFromArchive } from "../../src/tenant-lifecycle/archive-sealing.ts";
import { tenantTables, unclassifiedTables } from "../../src/tenant-lifecycle/tenant-tables.ts";
import type { Manifest } from "../../src/tenant-lifecycle/write-export.ts";
import { writeTenantExport } from "../../src/tenant-lifecycle/write-export.ts";
import { s3Settings, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

const clock = new ManualClock("2026-11-20T10:00:00Z");
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3(clock, "plinth-export");
  return () => s3.close();
});
const h = useTestApp({
  clock,
  settings: () => ({
    ...relaxedLimits,
    ...s3Settings(s3),
    "Security:TenantSecrets:KeyId": "ts-test",
    "Security:TenantSecrets:MasterKey": randomBytes(32).toString("base64"),
  }),
});

const json = (body: unknown) => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});

/** Runs the export's job as the job loop would, then reads the export back. */
async function finish(path: string, headers: Record<string, string>) {
  const [job] = await execute<{ payload: { exportId: string } }>(
    h.db,
    sql`select payload from background_jobs where kind = 'tenant.export' and status = 'pending' order by id desc limit 1`,
  );
  if (!job) throw new Error("no export job was enqueued");
  await writeTenantExport(h.deps, systemCtx("test"), job.payload);
  const res = await h.request(path.replace("{id}", job.payload.exportId), { headers });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    status: string;
    progress: number;
    downloadUrl?: string;
    manifest?: Manifest;
  };
}

/** Downloads the archive through its presigned link and unpacks it. */
async function unpack(url: string): Promise<{ dir: string; manifest: Manifest; bytes: Buffer }> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  const bytes = Buffer.from(await res.arrayBuffer());
  const dir = mkdtempSync(join(tmpdir(), "plinth-export-test-"));
  writeFileSync(join(dir, "archive.tar.gz"), bytes);
  await extract({ file: join(dir, "archive.tar.gz"), cwd: dir });
  const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as Manifest;
  return { dir, manifest, bytes };
}

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("tenant export", () => {
  test("an owner exports every row and object of their tenant; another tenant's owner gets 404", async () => {
    const tenant = await signedInTenant(h);
    const other = await signedInTenant(h);
    await h.deps.storage?.putObject(tenant.id, {
      key: "docs/hello.txt",
      body: new TextEncoder().encode("hello export"),
      contentType: "text/plain",
    });
    const admin = await signedInPlatformAdmin(h);
    const put = await h.request(`/api/admin/tenants/${tenant.id}/secrets/sms.token`, {
      method: "PUT",
      headers: { ...admin.headers, "content-type": "application/json" },
      body: JSON.stringify({ value: "super-secret-provider-value" }),
    });
    expect(put.status).toBe(204);

    const started = await h.request("/api/tenant/exports", { method: "POST", headers: tenant.owner.headers });
    expect(started.status).toBe(202);
    const { id } = (await started.json()) as { id: string };
    expect((await h.request(`/api/tenant/exports/${id}`, { headers: other.owner.headers })).status).toBe(404);
    expect((await h.request(`/api/tenant/exports/${id}`, { headers: tenant.admin.headers })).status).toBe(
      403,
    );

    const view = await finish("/api/tenant/exports/{id}", tenant.owner.headers);
    expect(view.status).toBe("succeeded");
    expect(view.progress).toBe(100);
    if (!view.downloadUrl) throw new Error("no download link");
    const { dir, manifest, bytes } = await unpack(view.downloadUrl);
    try {
      const last = await execute<{ tag: string }>(h.db, sql`select max(tag) as tag from schema_migrations`);
      expect(manifest.schemaVersion).toBe(last[0]?.tag ?? "");
      expect(manifest.tenant.id).toBe(tenant.id);
      for (const file of [...manifest.tables, ...manifest.objects])
        expect(sha256(join(dir, file.file))).toBe(file.sha256);
      const rows = (table: string) => manifest.tables.find((t) => t.table === table)?.rows;
      expect(rows("users")).toBe(3);
      expect(rows("tenant_memberships")).toBe(3);
      expect(rows("tenants")).toBe(1);
      expect(rows("sessions")).toBeGreaterThanOrEqual(3);
      expect(rows("refresh_tokens")).toBeGreaterThanOrEqual(3);
      // provider secret values are left out unless a platform admin seals them to a passphrase
      expect(rows("tenant_secrets")).toBeUndefined();
      expect(bytes.includes(Buffer.from("super-secret-provider-value"))).toBe(false);
      const users = readFileSync(join(dir, "tables/users.ndjson"), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(users.map((u: { email: string }) => u.email).sort()).toEqual(
        [tenant.owner.email, tenant.admin.email, tenant.member.email].sort(),
      );
      expect(readFileSync(join(dir, "tables/users.ndjson"), "utf8")).not.toContain(other.owner.email);
      expect(manifest.objects.map((o) => o.key)).toEqual([`tenants/${tenant.id}/docs/hello.txt`]);
      expect(readFileSync(join(dir, manifest.objects[0]?.file ?? ""), "utf8")).toBe("hello export");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a platform admin seals the provider secrets to a passphrase: the archive alone reveals nothing", async () => {
    const tenant = await signedInTenant(h);
    const admin = await signedInPlatformAdmin(h);
    await h.request(`/api/admin/tenants/${tenant.id}/secrets/payment.key`, {
      method: "PUT",
      headers: { ...admin.headers, "content-type": "application/json" },
      body: JSON.stringify({ value: "sk_live_abcdef0123456789" }),
    });
    const passphrase = "correct horse battery staple";
    const started = await h.request(`/api/admin/tenants/${tenant.id}/exports`, {
      ...json({ secretsPassphrase: passphrase }),
      headers: { ...admin.headers, "content-type": "application/json" },
    });
    expect(started.status).toBe(202);
    const [stored] = await execute<{ secrets_sealing: unknown }>(
      h.db,
      sql`select secrets_sealing from tenant_exports where tenant_id = ${tenant.id}`,
    );
    expect(JSON.stringify(stored?.secrets_sealing)).not.toContain(passphrase);
    const view = await finish(`/api/admin/tenants/${tenant.id}/exports/{id}`, admin.headers);
    expect(view.status).toBe("succeeded");
    const [cleared] = await execute<{ secrets_sealing: unknown }>(
      h.db,
      sql`select secrets_sealing from tenant_exports where tenant_id = ${tenant.id}`,
    );
    expect(cleared?.secrets_sealing).toBeNull();
    const { dir, manifest, bytes } = await unpack(view.downloadUrl ?? "");
    try {
      expect(bytes.includes(Buffer.from("sk_live_abcdef0123456789"))).toBe(false);
      if (!manifest.secrets.included) throw new Error("the secrets should be in the archive");
      const { salt } = manifest.secrets;
      const [row] = readFileSync(join(dir, "tables/tenant_secrets.ndjson"), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      const key = deriveArchiveKey(passphrase, salt);
      expect(openFromArchive(key, tenant.id, row.name, row)).toBe("sk_live_abcdef0123456789");
      expect(() =>
        openFromArchive(deriveArchiveKey("a wrong passphrase!!", salt), tenant.id, row.name, row),
      ).toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an export of a tenant that does not exist is a 404", async () => {
    const admin = await signedInPlatformAdmin(h);
    const res = await h.request(`/api/admin/tenants/${crypto.randomUUID()}/exports`, {
      method: "POST",
      headers: admin.headers,
    });
    expect(res.status).toBe(404);
  });
});

describe("which tables hold a tenant's rows (read from the catalog)", () => {
  test("every table of the schema is a tenant's or a named platform table", async () => {
    expect(await unclassifiedTables(h.db)).toEqual([]);
    const names = (await tenantTables(h.db)).map((t) => t.name);
    for (const child of ["refresh_tokens", "webhook_delivery_attempts", "job_dependencies"])
      expect(names).toContain(child);
    // parents before children: the order rows are loaded in
    expect(names.indexOf("sessions")).toBeLessThan(names.indexOf("refresh_tokens"));
    expect(names.indexOf("tenants")).toBeLessThan(names.indexOf("users"));
  });

  test("a new table is covered by its tenant_id or its parent, and one with neither fails the check by name", async () => {
    await h.db.execute(
      sql`create table probe_notes (id uuid primary key, tenant_id uuid not null references tenants(id))`,
    );
    await h.db.execute(sql`create table probe_note_marks (note_id uuid not null references probe_notes(id))`);
    await h.db.execute(sql`create table probe_stray (id int primary key)`);
    try {
      const tables = await tenantTables(h.db).catch((error: Error) => error);
      expect(tables).toBeInstanceOf(Error);
      expect((tables as Error).message).toContain("probe_stray");
      expect(await unclassifiedTables(h.db)).toEqual(["probe_stray"]);
      await h.db.execute(sql`drop table probe_stray`);
      const found = await tenantTables(h.db);
      expect(found.find((t) => t.name === "probe_notes")?.child).toBe(false);
      expect(found.find((t) => t.name === "probe_note_marks")?.child).toBe(true);
    } finally {
      await h.db.execute(sql`drop table if exists probe_stray, probe_note_marks, probe_notes`);
    }
  });
});
