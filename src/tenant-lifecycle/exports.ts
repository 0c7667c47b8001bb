/**
 * Asking for a tenant's export and following it (docs/tenant-lifecycle.md): the request writes the
 * export row and its `tenant.export` job in one transaction; reading it gives its state, its progress
 * and, once written, its manifest and a presigned download link that expires.
 */
import { and, eq, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { type Ctx, systemCtx, type TenantCtx } from "../context.ts";
import { execute } from "../db/client.ts";
import { withTransaction } from "../db/operation.ts";
import { type TenantExportStatus, tenantExports } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { enqueue, enqueueContext } from "../jobs/enqueue.ts";
import { jobWorker } from "../jobs/registry.ts";
import { sealForTenant } from "../security/tenant-data-keys.ts";
import { presignStored } from "../storage/prefix-objects.ts";
import { deriveArchiveKey, newArchiveSalt } from "./archive-sealing.ts";
import { type ExportDeps, tenantExportJob, writeTenantExport } from "./write-export.ts";

export type ExportRequestDeps = Pick<
  Deps,
  "database" | "clock" | "config" | "tenantSecretKeyring" | "storage"
>;

export interface TenantExportView {
  id: string;
  status: TenantExportStatus;
  progress: number;
  downloadUrl?: string;
  downloadExpiresAt?: string;
  manifest?: Record<string, unknown>;
  error?: string;
}

const noSuchTenant = () => new AppError("not_found", "No such tenant.");

/** What a passphrase must hold, at least: it is all that protects the secrets in the archive. */
export const MIN_PASSPHRASE = 16;

/**
 * Starts an export of the ctx's tenant. `secretsPassphrase` (platform admins only: the route
 * decides) includes the provider secrets, sealed to a key derived from it; without it they are left
 * out. The passphrase itself is stored nowhere: the derived key is kept sealed under the tenant-secret
 * keyring until the job has used it.
 */
export async function startTenantExport(
  deps: ExportRequestDeps,
  ctx: TenantCtx,
  input: { secretsPassphrase?: string | undefined },
): Promise<{ id: string }> {
  if (!deps.storage)
    throw new AppError("unavailable", "Object storage is not configured (Storage:S3:Bucket).");
  const exportId = crypto.randomUUID();
  const keyring = deps.tenantSecretKeyring;
  const { secretsPassphrase } = input;
  if (secretsPassphrase !== undefined && !keyring)
    throw new AppError("unavailable", "Tenant secrets are not configured (Security:TenantSecrets).");
  const salt = newArchiveSalt();
  const archiveKey =
    secretsPassphrase === undefined ? null : deriveArchiveKey(secretsPassphrase, salt).toString("base64");
  return withTransaction(deps, ctx, async (tx, ctx) => {
    const [tenant] = await execute<{ id: string }>(
      tx,
      sql`select id from tenants where id = ${ctx.tenantId}`,
    );
    if (!tenant) throw noSuchTenant();
    // the archive key waits for the job sealed under the tenant's data key
    const secretsSealing =
      archiveKey && keyring
        ? {
            salt,
            ...(await sealForTenant(tx, keyring, {
              tenantId: ctx.tenantId,
              name: `export:${exportId}`,
              value: archiveKey,
            })),
          }
        : null;
    await tx.insert(tenantExports).values({
      id: exportId,
      tenantId: ctx.tenantId,
      requestedBy: requesterOf(ctx),
      secretsSealing,
    });
    await enqueue(tx, enqueueContext(deps), tenantExportJob, { exportId }, { groupKey: "tenant-lifecycle" });
    await recordAudit(tx, ctx, {
      action: "tenant.export_requested",
      target: { type: "tenant_export", id: exportId },
      details: { tenantId: ctx.tenantId, secrets: secretsSealing !== null },
    });
    return { id: exportId };
  });
}

export function requesterOf(ctx: Ctx): string {
  const actor = ctx.actor;
  if (actor.type === "user") return `user:${actor.userId}`;
  if (actor.type === "system") return `system:${actor.name}`;
  if (actor.type === "apiKey") return `apiKey:${actor.keyId}`;
  return "anonymous";
}

/** One export of the ctx's tenant (another tenant's is a 404), with a fresh download link once written. */
export async function getTenantExport(
  deps: ExportRequestDeps,
  ctx: TenantCtx,
  input: { exportId: string },
): Promise<TenantExportView> {
  const row = await withTransaction(deps, ctx, async (tx) => {
    const [found] = await tx
      .select()
      .from(tenantExports)
      .where(and(eq(tenantExports.id, input.exportId), eq(tenantExports.tenantId, ctx.tenantId)));
    return found;
  });
  if (!row) throw new AppError("not_found", "No such export.");
  const view: TenantExportView = { id: row.id, status: row.status, progress: row.progress };
  if (row.error) view.error = row.error;
  if (row.manifest) view.manifest = row.manifest;
  if (row.status === "succeeded" && row.objectKey && deps.storage) {
    const link = await presignStored(
      deps.storage,
      row.objectKey,
      deps.config.settings.Tenancy.ExportLinkSeconds,
    );
    view.downloadUrl = link.url;
    view.downloadExpiresAt = link.expiresAt.toISOString();
  }
  return view;
}

/** The job's handler: registered by every process that runs the job loop. */
export const tenantExportWorker = jobWorker(tenantExportJob, (deps: ExportDeps, payload) =>
  writeTenantExport(deps, systemCtx("tenant-export"), payload),
);
