/**
 * The deletion job's work (docs/tenant-lifecycle.md): once the grace has run out, the tenant's data
 * key is destroyed first (crypto-shredding: its sealed values stop opening, in backups too), then every object
 * under the tenant's prefixes and every row of every tenant table (children first) goes, in batches
 * each committed with the running counts on the tenant's row, so a crash or a lost lease resumes
 * where it stopped; custom domains leave the TLS gateway first; the tenant row goes last, in the
 * transaction that writes the deletion certificate to the platform audit chain and reserves the
 * tenant's code and hosts.
 */
import { sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { endSessions } from "../auth/sessions.ts";
import { type Ctx, systemCtx } from "../context.ts";
import { deleteCustomDomain } from "../custom-domains/delete-custom-domain.ts";
import { execute } from "../db/client.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { enqueue, enqueueContext } from "../jobs/enqueue.ts";
import { jobKind } from "../jobs/registry.ts";
import { destroyTenantDataKey } from "../security/tenant-data-keys.ts";
import { deleteKeys, listPrefix } from "../storage/prefix-objects.ts";
import { quoteIdentifier, type TenantTable, tenantTables } from "./tenant-tables.ts";
import { tenantObjectPrefixes } from "./write-export.ts";

export const tenantDeleteJob = jobKind("tenant.delete", z.object({ tenantId: z.uuid() }), {
  maxAttempts: 20,
});

export type DeletionDeps = Pick<
  Deps,
  | "database"
  | "storage"
  | "clock"
  | "config"
  | "logger"
  | "cache"
  | "tenants"
  | "fetch"
  | "tenantSecretKeyring"
  | "sessionCache"
>;

/** The count naming the tenant's values still sealed directly under a master key when its data key went. */
export const MASTER_SEALED = "secrets:master-sealed";

/** Rows deleted per statement: one short transaction each. */
export const DELETE_BATCH = 1000;

interface Scheduled {
  id: string;
  code: string;
  scheduledFor: Date | null;
  requestedBy: string | null;
  counts: Record<string, number>;
}

async function readTenant(deps: DeletionDeps, tenantId: string): Promise<Scheduled | null> {
  return withPlatformTransaction(deps, systemCtx("tenant-deletion"), async (tx) => {
    const [row] = await execute<{
      id: string;
      code: string;
      deletion_scheduled_for: string | null;
      deletion_requested_by: string | null;
      deletion_counts: Record<string, number> | null;
    }>(
      tx,
      sql`select id, code, deletion_scheduled_for, deletion_requested_by, deletion_counts from tenants where id = ${tenantId}`,
    );
    if (!row) return null;
    return {
      id: row.id,
      code: row.code,
      scheduledFor: row.deletion_scheduled_for ? new Date(row.deletion_scheduled_for) : null,
      requestedBy: row.deletion_requested_by,
      counts: row.deletion_counts ?? {},
    };
  });
}

/** Adds `n` to the tenant's running count `name` (in the transaction that deleted them). */
const addCount = (tenantId: string, name: string, n: number) =>
  sql`update tenants set deletion_counts = jsonb_set(coalesce(deletion_counts, '{}'), ${`{${name}}`}::text[],
        to_jsonb(coalesce((deletion_counts->>${name})::bigint, 0) + ${n})) where id = ${tenantId}`;

async function deleteObjects(deps: DeletionDeps, tenantId: string, signal: AbortSignal): Promise<void> {
  const { storage } = deps;
  if (!storage) return;
  for (const prefix of tenantObjectPrefixes(tenantId))
    for await (const page of listPrefix(storage, prefix)) {
      signal.throwIfAborted();
      const deleted = await deleteKeys(
        storage,
        page.map((o) => o.key),
      );
      await withPlatformTransaction(deps, systemCtx("tenant-deletion"), (tx) =>
        tx.execute(addCount(tenantId, `prefix:${prefix}`, deleted)),
      );
    }
}

async function deleteRows(deps: DeletionDeps, tenantId: string, table: TenantTable, signal: AbortSignal) {
  const name = quoteIdentifier(table.name);
  const where = table.where.replaceAll("$1", `'${tenantId}'`);
  for (;;) {
    signal.throwIfAborted();
    const deleted = await withPlatformTransaction(deps, systemCtx("tenant-deletion"), async (tx) => {
      const [row] = await execute<{ n: number }>(
        tx,
        sql.raw(
          `with gone as (delete from ${name} where ctid in (select t.ctid from ${name} t where ${where} limit ${DELETE_BATCH}) returning 1)
           select count(*)::int as n from gone`,
        ),
      );
      const n = row?.n ?? 0;
      if (n > 0) await tx.execute(addCount(tenantId, table.name, n));
      return n;
    });
    if (deleted < DELETE_BATCH) return;
  }
}

/**
 * Crypto-shredding, before anything else goes: the tenant's wrapped data key is deleted (and evicted
 * in every process), recorded in the running counts with the number of its values that were still
 * sealed directly under a master key (written before data keys and never re-sealed by
 * `secrets:rotate`: a backup holding them opens until that master key is retired). Done once.
 */
async function shredDataKey(deps: DeletionDeps, tenantId: string): Promise<void> {
  await withPlatformTransaction(deps, systemCtx("tenant-deletion"), async (tx) => {
    const [tenant] = await execute<{ done: boolean }>(
      tx,
      sql`select coalesce(deletion_counts ? 'tenant_data_keys', false) as done from tenants where id = ${tenantId} for update`,
    );
    if (!tenant || tenant.done) return;
    const [legacy] = await execute<{ n: number }>(
      tx,
      sql`select (select count(*) from tenant_secrets where tenant_id = ${tenantId} and key_id not like 'tdk\_%')
               + (select count(*) from totp_factors f join users u on u.id = f.user_id
                  where u.tenant_id = ${tenantId} and f.secret_key_id not like 'tdk\_%') as n`,
    );
    const destroyed = await destroyTenantDataKey(tx, deps.tenantSecretKeyring, tenantId);
    await tx.execute(addCount(tenantId, "tenant_data_keys", destroyed ? 1 : 0));
    await tx.execute(addCount(tenantId, MASTER_SEALED, Number(legacy?.n ?? 0)));
  });
}

/** Keeps `value` from reuse for `Tenancy:ReservedDays`. */
const reserve = (deps: DeletionDeps, tenantId: string, kind: "code" | "host", value: string) => {
  const until = new Date(deps.clock.now().getTime() + deps.config.settings.Tenancy.ReservedDays * 86_400_000);
  return sql`insert into tenant_reservations (kind, value, deleted_tenant_id, reserved_until)
    values (${kind}, ${value}, ${tenantId}, ${until.toISOString()}::timestamptz)
    on conflict (kind, value) do update set deleted_tenant_id = excluded.deleted_tenant_id, reserved_until = excluded.reserved_until`;
};

/** Each custom domain is reserved, then leaves the gateway and the database (a gateway outage fails the job, retried later). */
async function deregisterDomains(deps: DeletionDeps, tenantId: string): Promise<void> {
  const domains = await withPlatformTransaction(deps, systemCtx("tenant-deletion"), async (tx) => {
    const rows = await execute<{ id: string; hostname: string }>(
      tx,
      sql`select id, hostname from tenant_domains where tenant_id = ${tenantId}`,
    );
    for (const row of rows) await tx.execute(reserve(deps, tenantId, "host", row.hostname));
    return rows;
  });
  const ctx = systemCtx("tenant-deletion", tenantId);
  for (const domain of domains) await deleteCustomDomain(deps, ctx, { id: domain.id });
}

/** The last step: the code reserved, the tenant row deleted and the certificate written, together. */
async function writeCertificate(deps: DeletionDeps, tenant: Scheduled) {
  await withPlatformTransaction(deps, systemCtx("tenant-deletion"), async (tx, ctx) => {
    await tx.execute(reserve(deps, tenant.id, "code", tenant.code));
    const [row] = await execute<{ counts: Record<string, number> | null }>(
      tx,
      sql`delete from tenants where id = ${tenant.id} returning deletion_counts as counts`,
    );
    const { [MASTER_SEALED]: masterSealed, ...counts }: Record<string, number> = {
      ...(row?.counts ?? {}),
      tenants: 1,
    };
    await recordAudit(tx, ctx, {
      action: "tenant.deleted",
      target: { type: "tenant", id: tenant.id },
      tenantId: null,
      details: {
        code: tenant.code,
        counts,
        // backups of the tenant's rows no longer open what was sealed under its data key
        dataKeyDestroyed: (counts.tenant_data_keys ?? 0) > 0,
        masterSealedValues: masterSealed ?? 0,
        requestedBy: tenant.requestedBy ?? "unknown",
        scheduledFor: tenant.scheduledFor?.toISOString() ?? null,
      },
    });
  });
}

/**
 * Deletes the tenant when its deletion is due: nothing when it was canceled, a new job when it was
 * moved later. Safe to run again after any interruption (`signal`: a lost lease, a shutdown).
 */
export async function deleteTenantData(
  deps: DeletionDeps,
  _ctx: Ctx,
  input: { tenantId: string; signal?: AbortSignal },
): Promise<"deleted" | "not_due" | "not_scheduled"> {
  const signal = input.signal ?? new AbortController().signal;
  const tenant = await readTenant(deps, input.tenantId);
  if (!tenant?.scheduledFor) return "not_scheduled";
  if (tenant.scheduledFor.getTime() > deps.clock.now().getTime()) {
    await withPlatformTransaction(deps, systemCtx("tenant-deletion"), (tx) =>
      enqueue(
        tx,
        enqueueContext(deps),
        tenantDeleteJob,
        { tenantId: tenant.id },
        { runAfter: tenant.scheduledFor ?? undefined, groupKey: "tenant-lifecycle" },
      ),
    );
    return "not_due";
  }
  // from here the tenant is gone for its users: no sign-in, no request; its sessions end with the
  // suspension, in every process's session cache as it commits (as suspendTenant's do)
  await withPlatformTransaction(deps, systemCtx("tenant-deletion"), async (tx, ctx) => {
    await tx.execute(
      sql`update tenants set status = 'Suspended', deletion_counts = coalesce(deletion_counts, '{}') where id = ${tenant.id}`,
    );
    await endSessions(deps, ctx, { tenantId: tenant.id });
  });
  deps.tenants.clear();
  await shredDataKey(deps, tenant.id);
  await deregisterDomains(deps, tenant.id);
  await deleteObjects(deps, tenant.id, signal);
  const tables = await withPlatformTransaction(deps, systemCtx("tenant-deletion"), (tx) => tenantTables(tx));
  // children before parents; the tenant row last, with the certificate
  for (const table of [...tables].reverse())
    if (table.name !== "tenants") await deleteRows(deps, tenant.id, table, signal);
  await writeCertificate(deps, tenant);
  return "deleted";
}
