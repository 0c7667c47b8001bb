/**
 * Restoring a tenant from its export archive (`bun run tenant:import`, docs/tenant-lifecycle.md):
 * the archive is unpacked into a scratch directory, every file checked against the manifest
 * (size and SHA-256) and the manifest's schema version against this database's last migration;
 * then the objects are stored and every row loaded in one transaction (parents first, as the export
 * wrote them), provider secrets opened with the export's passphrase and sealed again under this
 * installation's keys. Nothing is half-loaded: a refused archive or a failed load changes nothing
 * (objects stored before the failure are removed).
 */
import { createHash } from "node:crypto";
import { createReadStream, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { sql } from "drizzle-orm";
import { extract } from "tar";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { execute, type Tx } from "../db/client.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { sealForTenant } from "../security/tenant-data-keys.ts";
import type { TenantSecretKeyring } from "../security/tenant-secrets.ts";
import { deleteKeys, putFile } from "../storage/prefix-objects.ts";
import { TENANT_CODE } from "../tenancy/tenants.ts";
import {
  archiveName,
  deriveArchiveKey,
  openFromArchive,
  SEALED_TABLES,
  sealedValueOf,
  withSealed,
} from "./archive-sealing.ts";
import { quoteIdentifier, type TenantTable, tenantTables } from "./tenant-tables.ts";
import { ARCHIVE_FORMAT, type Manifest, schemaVersion } from "./write-export.ts";

export type ImportDeps = Pick<Deps, "database" | "storage" | "tenantSecretKeyring" | "clock">;

/**
 * Tables an import leaves out: queued work of the source installation must not run here again, and
 * a data key never comes from an archive (the import makes the tenant a new one here).
 */
export const NOT_IMPORTED = new Set([
  "background_jobs",
  "job_dependencies",
  "tenant_exports",
  "tenant_data_keys",
]);

/** Why an archive is refused (the command exits 2 naming it); nothing was changed. */
export class ArchiveRefusedError extends Error {
  override name = "ArchiveRefusedError";
}

const INSERT_ROWS = 500;

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Unpacks the archive and checks it against its manifest and this database. */
async function openArchive(deps: ImportDeps, path: string, dir: string): Promise<Manifest> {
  await extract({ file: path, cwd: dir, strict: true });
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as Manifest;
  } catch {
    throw new ArchiveRefusedError("the archive has no readable manifest.json");
  }
  if (manifest.format !== ARCHIVE_FORMAT)
    throw new ArchiveRefusedError(
      `the archive's format is ${JSON.stringify(manifest.format)}, not ${ARCHIVE_FORMAT}`,
    );
  const version = await schemaVersion(deps.database.db);
  if (manifest.schemaVersion !== version)
    throw new ArchiveRefusedError(
      `the archive was written at schema ${manifest.schemaVersion}; this database is at ${version} (migrate the one behind first)`,
    );
  for (const file of [...manifest.tables, ...(manifest.references ?? []), ...manifest.objects]) {
    const full = join(dir, file.file);
    let size: number;
    try {
      size = statSync(full).size;
    } catch {
      throw new ArchiveRefusedError(`${file.file} is in the manifest but not in the archive`);
    }
    if (size !== file.size || (await sha256Of(full)) !== file.sha256)
      throw new ArchiveRefusedError(`${file.file} does not match its SHA-256 in the manifest`);
  }
  return manifest;
}

interface Rewrite {
  tenantId: string;
  code: string;
  archiveKey: Buffer | null;
  keyring: TenantSecretKeyring | null;
}

/** One row as this installation stores it: the new code, secrets sealed again, the deletion schedule dropped. */
async function rewriteRow(
  tx: Tx,
  table: string,
  row: Record<string, unknown>,
  r: Rewrite,
): Promise<Record<string, unknown>> {
  if (table === "tenants")
    return {
      ...row,
      code: r.code,
      deletion_scheduled_for: null,
      deletion_requested_by: null,
      deletion_counts: null,
    };
  const columns = SEALED_TABLES[table];
  if (columns) {
    if (!r.archiveKey || !r.keyring)
      throw new ArchiveRefusedError("the archive holds secrets and no key opens them");
    const { binding, name, sealed } = sealedValueOf(columns, row, r.tenantId);
    const value = openFromArchive(
      r.archiveKey,
      r.tenantId,
      archiveName(table, binding, name, r.tenantId),
      sealed,
    );
    // under the tenant's data key here, made by the first value sealed
    return withSealed(
      columns,
      row,
      await sealForTenant(tx, r.keyring, { tenantId: r.tenantId, binding, name, value }),
    );
  }
  return row;
}

/**
 * The insert of one table's rows: a nullable reference to a row this installation does not have
 * (the platform admin who created or impersonated something in the source) is loaded as null;
 * `skipExisting` (shared rows: an identity that may be here already) leaves out rows already here.
 */
async function insertStatement(tx: Tx, table: string, skipExisting: boolean): Promise<string> {
  const q = quoteIdentifier;
  const columns = await execute<{ name: string }>(
    tx,
    sql`select attname as name from pg_attribute where attrelid = ${q(table)}::regclass and attnum > 0 and not attisdropped order by attnum`,
  );
  const nullable = new Map<string, { parent: string; column: string }>();
  for (const key of (await tenantTablesOf(tx)).get(table)?.references ?? [])
    if (!key.required && key.columns.length === 1 && key.columns[0] && key.parentColumns[0])
      nullable.set(key.columns[0], { parent: key.parent, column: key.parentColumns[0] });
  const values = columns.map(({ name }) => {
    const key = nullable.get(name);
    return key
      ? `case when exists (select 1 from ${q(key.parent)} x where x.${q(key.column)} = r.${q(name)}) then r.${q(name)} end`
      : `r.${q(name)}`;
  });
  return `insert into ${q(table)} (${columns.map((c) => q(c.name)).join(", ")}) overriding system value
          select ${values.join(", ")} from jsonb_populate_recordset(null::${q(table)}, $rows) r
          ${skipExisting ? "on conflict do nothing" : ""}`;
}

const catalogs = new WeakMap<Tx, Promise<Map<string, TenantTable>>>();
function tenantTablesOf(tx: Tx): Promise<Map<string, TenantTable>> {
  let found = catalogs.get(tx);
  if (!found) {
    found = tenantTables(tx).then((tables) => new Map(tables.map((t) => [t.name, t])));
    catalogs.set(tx, found);
  }
  return found;
}

async function insertRows(tx: Tx, statement: string, rows: Record<string, unknown>[]): Promise<void> {
  const [before, after] = statement.split("$rows");
  await tx.execute(
    sql
      .raw(before ?? "")
      .append(sql`${JSON.stringify(rows)}::jsonb`)
      .append(sql.raw(after ?? "")),
  );
}

async function loadTable(
  tx: Tx,
  dir: string,
  file: Manifest["tables"][number],
  r: Rewrite,
  skipExisting = false,
): Promise<number> {
  const statement = await insertStatement(tx, file.table, skipExisting);
  const lines = createInterface({
    input: createReadStream(join(dir, file.file)),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let batch: Record<string, unknown>[] = [];
  let count = 0;
  for await (const line of lines) {
    if (!line) continue;
    batch.push(await rewriteRow(tx, file.table, JSON.parse(line) as Record<string, unknown>, r));
    if (batch.length === INSERT_ROWS) {
      await insertRows(tx, statement, batch);
      count += batch.length;
      batch = [];
    }
  }
  if (batch.length > 0) await insertRows(tx, statement, batch);
  return count + batch.length;
}

/** Identity sequences moved past the rows loaded with their own ids. */
async function advanceSequences(tx: Tx, tables: string[]): Promise<void> {
  const identities = await execute<{ table: string; column: string }>(
    tx,
    sql`select c.relname as table, a.attname as column from pg_attribute a join pg_class c on c.oid = a.attrelid
        join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and a.attidentity <> '' and c.relname = any(string_to_array(${tables.join(",")}, ','))`,
  );
  for (const { table, column } of identities)
    await tx.execute(
      sql.raw(
        `select setval(pg_get_serial_sequence('${quoteIdentifier(table)}', '${column.replaceAll("'", "''")}'),
           greatest((select coalesce(max(${quoteIdentifier(column)}), 0) from ${quoteIdentifier(table)}), 1))`,
      ),
    );
}

/**
 * Refuses a tenant id already here, or a code taken or kept (at `now`, the injected clock's) for
 * another deleted tenant.
 */
async function checkTarget(tx: Tx, tenantId: string, code: string, now: Date): Promise<void> {
  const [taken] = await execute<{ what: string }>(
    tx,
    sql`select 'id' as what from tenants where id = ${tenantId}
        union all select 'code' from tenants where code = ${code}
        union all select 'reserved' from tenant_reservations
          where kind = 'code' and value = ${code} and reserved_until > ${now.toISOString()}::timestamptz
            and deleted_tenant_id <> ${tenantId}`,
  );
  if (taken?.what === "id") throw new ArchiveRefusedError(`a tenant with the id ${tenantId} exists here`);
  if (taken) throw new ArchiveRefusedError(`the code ${code} is taken here (pass --as <code>)`);
}

export interface ImportResult {
  tenantId: string;
  code: string;
  counts: Record<string, number>;
}

/** Loads the archive at `path`; throws ArchiveRefusedError naming why it was refused. */
export async function importTenantArchive(
  deps: ImportDeps,
  ctx: Ctx,
  input: { path: string; as?: string | undefined; passphrase?: string | undefined },
): Promise<ImportResult> {
  const dir = mkdtempSync(join(tmpdir(), "plinth-import-"));
  const stored: string[] = [];
  try {
    const manifest = await openArchive(deps, input.path, dir);
    const tenantId = manifest.tenant.id;
    const code = (input.as ?? manifest.tenant.code).toLowerCase();
    if (!TENANT_CODE.test(code)) throw new ArchiveRefusedError(`${code} is not a valid tenant code`);
    let archiveKey: Buffer | null = null;
    if (manifest.secrets.included) {
      if (input.passphrase === undefined)
        throw new ArchiveRefusedError(
          "the archive holds provider secrets: give its passphrase (--passphrase-file)",
        );
      if (!deps.tenantSecretKeyring)
        throw new ArchiveRefusedError(
          "Security:TenantSecrets is not configured here: the secrets cannot be sealed",
        );
      archiveKey = deriveArchiveKey(input.passphrase, manifest.secrets.salt);
    }
    if (manifest.objects.length > 0 && !deps.storage)
      throw new ArchiveRefusedError("the archive holds objects and Storage:S3:Bucket is not configured here");
    const rewrite = { tenantId, code, archiveKey, keyring: deps.tenantSecretKeyring };
    return await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
      await checkTarget(tx, tenantId, code, deps.clock.now());
      const counts: Record<string, number> = {};
      for (const file of manifest.references ?? []) await loadTable(tx, dir, file, rewrite, true);
      for (const file of manifest.tables)
        if (!NOT_IMPORTED.has(file.table)) counts[file.table] = await loadTable(tx, dir, file, rewrite);
      await advanceSequences(tx, Object.keys(counts));
      await tx.execute(sql`delete from tenant_reservations where deleted_tenant_id = ${tenantId}`);
      for (const object of manifest.objects) {
        const { storage } = deps;
        if (!storage) break;
        await putFile(storage, object.key, {
          path: join(dir, object.file),
          size: object.size,
          contentType: object.contentType ?? "application/octet-stream",
        });
        stored.push(object.key);
      }
      counts.objects = manifest.objects.length;
      await recordAudit(tx, ctx, {
        action: "tenant.imported",
        target: { type: "tenant", id: tenantId },
        tenantId: null,
        details: { code, counts },
      });
      return { tenantId, code, counts };
    });
  } catch (error) {
    if (deps.storage && stored.length > 0) await deleteKeys(deps.storage, stored).catch(() => {});
    throw error;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
