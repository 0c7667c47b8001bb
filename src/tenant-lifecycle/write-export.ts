/**
 * The export job (docs/tenant-lifecycle.md): every row of the tenant as NDJSON per table (tables
 * found in the catalog, src/tenant-lifecycle/tenant-tables.ts) and every object under its prefix,
 * with a manifest (counts, SHA-256 of each file, the schema version), packed into one `.tar.gz`
 * stored at `tenant-exports/<tenant>/<export>.tar.gz`. Rows come through a cursor and objects as
 * streams into a scratch directory, so memory stays bounded whatever the tenant's size.
 */
import { createHash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { eq, sql } from "drizzle-orm";
import { create as createTar } from "tar";
import { z } from "zod";
import { type Ctx, systemCtx } from "../context.ts";
import { type Executor, execute, type Tx } from "../db/client.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import { tenantExports } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { jobKind } from "../jobs/registry.ts";
import { describeError } from "../redact.ts";
import { openSealed } from "../security/tenant-data-keys.ts";
import type { TenantSecretKeyring } from "../security/tenant-secrets.ts";
import type { ObjectStorage } from "../storage/object-storage.ts";
import { listPrefix, putFile, readStored } from "../storage/prefix-objects.ts";
import { isLowerCaseUuid } from "../uuid.ts";
import {
  ARCHIVE_KDF,
  archiveName,
  SEALED_TABLES,
  sealedValueOf,
  sealForArchive,
  withSealed,
} from "./archive-sealing.ts";
import { quoteIdentifier, selectRows, type TenantTable, tenantTables } from "./tenant-tables.ts";

export const ARCHIVE_FORMAT = "plinth-tenant-export/1";
export const exportArchiveKey = (tenantId: string, exportId: string) =>
  `tenant-exports/${tenantId}/${exportId}.tar.gz`;
/** Every prefix of the bucket that holds a tenant's objects (deletion empties each). */
export const tenantObjectPrefixes = (tenantId: string) => [
  `tenants/${tenantId}/`,
  `tenant-exports/${tenantId}/`,
];

export const tenantExportJob = jobKind("tenant.export", z.object({ exportId: z.uuid() }), { maxAttempts: 3 });

export type ExportDeps = Pick<Deps, "database" | "storage" | "tenantSecretKeyring" | "logger" | "clock">;

export interface ManifestFile {
  file: string;
  rows?: number;
  size: number;
  sha256: string;
}

export interface Manifest {
  format: typeof ARCHIVE_FORMAT;
  schemaVersion: string;
  exportedAt: string;
  tenant: { id: string; code: string; name: string };
  tables: Array<ManifestFile & { table: string }>;
  /**
   * Rows of other owners the tenant's rows cannot exist without (a shared identity its memberships
   * name), loaded first at import when absent; `password_hash` left out.
   */
  references: Array<ManifestFile & { table: string }>;
  objects: Array<ManifestFile & { key: string; contentType: string | null }>;
  secrets: { included: false } | { included: true; kdf: typeof ARCHIVE_KDF; salt: string };
}

const FETCH_ROWS = 500;

/** A file written line by line (or chunk by chunk), hashed as it goes. */
class HashedFile {
  readonly #stream;
  readonly #hash = createHash("sha256");
  size = 0;
  constructor(readonly path: string) {
    this.#stream = createWriteStream(path);
  }
  async write(chunk: string | Buffer): Promise<void> {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    this.#hash.update(buffer);
    this.size += buffer.length;
    if (!this.#stream.write(buffer)) await once(this.#stream, "drain");
  }
  async close(): Promise<string> {
    this.#stream.end();
    await once(this.#stream, "finish");
    return this.#hash.digest("hex");
  }
}

/** The tenant's rows of one table, a cursor page at a time. */
async function* tableRows(tx: Tx, table: TenantTable, tenantId: string): AsyncGenerator<string[]> {
  if (!isLowerCaseUuid(tenantId)) throw new Error("the tenant id is not a lower-case uuid");
  // the id is checked above: only hex digits and dashes reach the text of the cursor
  const query = selectRows(table).replaceAll("$1", `'${tenantId}'`);
  await tx.execute(sql.raw(`declare tenant_rows no scroll cursor for ${query}`));
  try {
    for (;;) {
      const rows = await execute<{ row: string }>(tx, sql.raw(`fetch ${FETCH_ROWS} from tenant_rows`));
      if (rows.length === 0) return;
      yield rows.map((r) => r.row);
    }
  } finally {
    await tx.execute(sql.raw("close tenant_rows"));
  }
}

/** The last migration applied: an archive loads only into a database at the same one. */
export async function schemaVersion(db: Executor): Promise<string> {
  const [row] = await execute<{ tag: string | null }>(db, sql`select max(tag) as tag from schema_migrations`);
  return row?.tag ?? "";
}

interface SecretSealing {
  keyring: TenantSecretKeyring;
  archiveKey: Buffer;
}

/** Tables never written to an archive: the tenant's data key stays in this installation. */
const NOT_EXPORTED = new Set(["tenant_data_keys"]);

/** A row of a SEALED_TABLES table with its value sealed for the archive instead of under the tenant's data key. */
async function resealed(tx: Tx, table: string, line: string, tenantId: string, sealing: SecretSealing) {
  const columns = SEALED_TABLES[table];
  if (!columns) return line;
  const row = JSON.parse(line) as Record<string, unknown>;
  const { binding, name, sealed } = sealedValueOf(columns, row, tenantId);
  const value = await openSealed(tx, sealing.keyring, { binding, name, sealed });
  const archived = sealForArchive(
    sealing.archiveKey,
    tenantId,
    archiveName(table, binding, name, tenantId),
    value,
  );
  return JSON.stringify(withSealed(columns, row, archived));
}

/** The archive key of an export that asked for secrets, opened from its sealed form; null when none was asked. */
async function archiveSealing(
  deps: ExportDeps,
  row: typeof tenantExports.$inferSelect,
): Promise<SecretSealing | null> {
  if (!row.secretsSealing) return null;
  const keyring = deps.tenantSecretKeyring;
  if (!keyring) throw new Error("tenant secrets are not configured (Security:TenantSecrets)");
  const sealed = row.secretsSealing;
  const key = await withPlatformTransaction(deps, systemCtx("tenant-export"), (tx) =>
    openSealed(tx, keyring, { binding: row.tenantId, name: `export:${row.id}`, sealed }),
  );
  return { keyring, archiveKey: Buffer.from(key, "base64") };
}

async function writeTables(
  deps: ExportDeps,
  dir: string,
  tenantId: string,
  sealing: SecretSealing | null,
  onTable: (done: number, total: number) => Promise<void>,
): Promise<Pick<Manifest, "tables" | "references">> {
  mkdirSync(join(dir, "tables"));
  return withPlatformTransaction(deps, systemCtx("tenant-export"), async (tx) => {
    const tables = await tenantTables(tx);
    const written: Manifest["tables"] = [];
    for (const [i, table] of tables.entries()) {
      // sealed values (provider secrets, authenticators) only when the platform admin asked for them sealed
      if (NOT_EXPORTED.has(table.name) || (SEALED_TABLES[table.name] && !sealing)) continue;
      const file = `tables/${table.name}.ndjson`;
      const out = new HashedFile(join(dir, file));
      let rows = 0;
      for await (const page of tableRows(tx, table, tenantId))
        for (const line of page) {
          await out.write(`${sealing ? await resealed(tx, table.name, line, tenantId, sealing) : line}\n`);
          rows++;
        }
      const sha256 = await out.close();
      written.push({ table: table.name, file, rows, size: out.size, sha256 });
      await onTable(i + 1, tables.length);
    }
    return { tables: written, references: await writeReferences(tx, dir, tables, tenantId) };
  });
}

/** A `select` of the rows of `parent` that the tenant's rows require and that are not the tenant's. */
function referencedRows(parent: TenantTable, tables: TenantTable[]): string | null {
  const q = quoteIdentifier;
  const needed = tables.flatMap((child) =>
    child.references
      .filter((k) => k.required && k.parent === parent.name)
      .map(
        (k) =>
          `(${k.parentColumns.map((c) => `r.${q(c)}`).join(", ")}) in (select ${k.columns.map((c) => `t.${q(c)}`).join(", ")} from ${q(child.name)} t where ${child.where})`,
      ),
  );
  if (needed.length === 0) return null;
  return `select (to_jsonb(r) - 'password_hash')::text as row from ${q(parent.name)} r
          where not coalesce((${parent.whereAs("r")}), false) and (${needed.join(" or ")})`;
}

async function writeReferences(tx: Tx, dir: string, tables: TenantTable[], tenantId: string) {
  const written: Manifest["references"] = [];
  for (const parent of tables) {
    const query = referencedRows(parent, tables);
    if (!query) continue;
    const rows = await execute<{ row: string }>(tx, sql.raw(query.replaceAll("$1", `'${tenantId}'`)));
    if (rows.length === 0) continue;
    mkdirSync(join(dir, "references"), { recursive: true });
    const file = `references/${parent.name}.ndjson`;
    const out = new HashedFile(join(dir, file));
    for (const { row } of rows) await out.write(`${row}\n`);
    const sha256 = await out.close();
    written.push({ table: parent.name, file, rows: rows.length, size: out.size, sha256 });
  }
  return written;
}

async function writeObjects(storage: ObjectStorage | null, dir: string, tenantId: string) {
  const objects: Manifest["objects"] = [];
  if (!storage) return objects;
  mkdirSync(join(dir, "objects"));
  for await (const page of listPrefix(storage, `tenants/${tenantId}/`))
    for (const object of page) {
      const file = `objects/${String(objects.length + 1).padStart(6, "0")}`;
      const out = new HashedFile(join(dir, file));
      const { body, contentType } = await readStored(storage, object.key);
      for await (const chunk of body as Readable) await out.write(chunk as Buffer);
      const sha256 = await out.close();
      objects.push({ key: object.key, file, size: out.size, sha256, contentType: contentType ?? null });
    }
  return objects;
}

async function setProgress(
  deps: ExportDeps,
  exportId: string,
  values: Partial<typeof tenantExports.$inferInsert>,
) {
  await withPlatformTransaction(deps, systemCtx("tenant-export"), (tx) =>
    tx.update(tenantExports).set(values).where(eq(tenantExports.id, exportId)),
  );
}

/** Writes the export `exportId` (the job's work); a failure is recorded on the export, never thrown. */
export async function writeTenantExport(
  deps: ExportDeps,
  ctx: Ctx,
  input: { exportId: string },
): Promise<void> {
  const { exportId } = input;
  const found = await withPlatformTransaction(deps, ctx, async (tx) => {
    const [row] = await tx.select().from(tenantExports).where(eq(tenantExports.id, exportId));
    if (!row || row.status === "succeeded") return null;
    const [tenant] = await execute<{ id: string; code: string; name: string }>(
      tx,
      sql`select id, code, name from tenants where id = ${row.tenantId}`,
    );
    return tenant ? { row, tenant, version: await schemaVersion(tx) } : null;
  });
  if (!found) return;
  const { row, tenant, version } = found;
  const dir = mkdtempSync(join(tmpdir(), "plinth-export-"));
  try {
    if (!deps.storage) throw new Error("object storage is not configured (Storage:S3:Bucket)");
    await setProgress(deps, exportId, { status: "running", progress: 0, error: null });
    const sealing = await archiveSealing(deps, row);
    const { tables, references } = await writeTables(deps, dir, tenant.id, sealing, (done, total) =>
      setProgress(deps, exportId, { progress: Math.floor((done / total) * 80) }),
    );
    const objects = await writeObjects(deps.storage, dir, tenant.id);
    await setProgress(deps, exportId, { progress: 90 });
    const manifest: Manifest = {
      format: ARCHIVE_FORMAT,
      schemaVersion: version,
      exportedAt: deps.clock.now().toISOString(),
      tenant,
      tables,
      references,
      objects,
      secrets:
        sealing && row.secretsSealing
          ? { included: true, kdf: ARCHIVE_KDF, salt: row.secretsSealing.salt }
          : { included: false },
    };
    writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest, null, 2));
    const archive = join(dir, "archive.tar.gz");
    await createTar({ gzip: true, file: archive, cwd: dir, portable: true }, [
      "manifest.json",
      "tables",
      ...(references.length ? ["references"] : []),
      ...(objects.length ? ["objects"] : []),
    ]);
    const key = exportArchiveKey(tenant.id, exportId);
    await putFile(deps.storage, key, {
      path: archive,
      size: statSync(archive).size,
      contentType: "application/gzip",
    });
    rmSync(archive, { force: true });
    await setProgress(deps, exportId, {
      status: "succeeded",
      progress: 100,
      objectKey: key,
      manifest: manifest as unknown as Record<string, unknown>,
      secretsSealing: null,
      finishedAt: deps.clock.now(),
    });
  } catch (error) {
    deps.logger.error("tenant export failed", { exportId, error: describeError(error) });
    await setProgress(deps, exportId, {
      status: "failed",
      error: error instanceof Error ? error.message.slice(0, 500) : "the export failed",
      secretsSealing: null,
      finishedAt: deps.clock.now(),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
