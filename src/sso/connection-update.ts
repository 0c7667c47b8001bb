import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { requireRecentSecondFactor } from "../auth/step-up.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { ssoConnections, tenantSecrets } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { writeTenantSecret } from "../providers/tenant-secret-store.ts";
import { type ConnectionOptions, secretKeyring } from "./connection-create.ts";
import type { SsoConnectionRow } from "./connection-types.ts";
import {
  clientSecretName,
  connectionView,
  findConnectionRow,
  oneEnabledOnly,
  otherEnabledConnection,
  type SsoConnectionView,
} from "./connections.ts";
import { checkOidcIssuer } from "./oidc/oidc-issuer-check.ts";
import { samlSettingsFrom } from "./saml/saml-settings.ts";
import type { SsoDeps } from "./sso-deps.ts";

export type SsoConnectionChange = ConnectionOptions & {
  issuer?: string;
  clientId?: string;
  clientSecret?: string;
  metadataXml?: string;
  metadataUrl?: string;
};

const OIDC_FIELDS = ["issuer", "clientId", "clientSecret"] as const;
const SAML_FIELDS = ["metadataXml", "metadataUrl"] as const;

/** The protocol columns a change sets: the issuer discovered again, the metadata read again. */
async function protocolChange(
  deps: SsoDeps,
  row: SsoConnectionRow,
  input: SsoConnectionChange,
): Promise<Partial<typeof ssoConnections.$inferInsert>> {
  const foreign = (row.type === "oidc" ? SAML_FIELDS : OIDC_FIELDS).filter((f) => input[f] !== undefined);
  if (foreign.length > 0)
    throw new AppError("unprocessable", `This is an ${row.type} connection.`, {
      fields: foreign.map((path) => ({ path, message: `not a field of ${row.type} connections` })),
    });
  if (row.type === "saml") {
    if (input.metadataXml === undefined && input.metadataUrl === undefined) return {};
    const settings = await samlSettingsFrom(deps, {
      metadataXml: input.metadataXml,
      metadataUrl: input.metadataUrl,
    });
    return { settings: { ...settings } };
  }
  return {
    ...(input.issuer !== undefined ? { issuer: await checkOidcIssuer(deps, input.issuer) } : {}),
    ...(input.clientId !== undefined ? { clientId: input.clientId } : {}),
    ...(input.clientSecret !== undefined ? { clientSecretName: clientSecretName(row.id) } : {}),
  };
}

/** The names of the fields a change gives (audit and event: never a value of the secret). */
const changedFields = (input: SsoConnectionChange) =>
  Object.entries(input)
    .filter(([, value]) => value !== undefined)
    .map(([name]) => name)
    .sort();

/**
 * Changes one of the ctx tenant's connections (`PATCH /api/tenant/sso/connections/{id}`): its name,
 * `enabled` (409 when another is enabled), default role, group roles, claim mapping; OIDC: issuer
 * (discovered again), client id, a replacement client secret; SAML: the IdP metadata imported again
 * (a rolled certificate). 402 without `sso`, step-up, audited (`fields`, never the secret) and
 * announced (`sso_connection.updated`).
 */
export async function updateSsoConnection(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { id: string; change: SsoConnectionChange },
): Promise<SsoConnectionView> {
  const { change } = input;
  // another tenant's connection is a 404 whatever this tenant's plan
  const current = await withDatabase(deps, ctx, (db) => findConnectionRow(db, ctx, input.id));
  await assertFeature(deps, ctx, { feature: "sso" });
  await requireRecentSecondFactor(deps, ctx);
  const protocol = await protocolChange(deps, current, change);
  const keyring = change.clientSecret !== undefined ? secretKeyring(deps) : null;
  const fields = changedFields(change);
  const now = deps.clock.now();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const locked = await findConnectionRow(tx, ctx, input.id, true);
    if (change.enabled === true && (await otherEnabledConnection(tx, ctx, locked.id))) throw oneEnabledOnly();
    if (keyring && change.clientSecret !== undefined)
      await writeTenantSecret(tx, keyring, ctx.tenantId, {
        name: clientSecretName(locked.id),
        value: change.clientSecret,
        now,
      });
    const [updated] = await tx
      .update(ssoConnections)
      .set({
        ...protocol,
        ...(change.name !== undefined ? { name: change.name } : {}),
        ...(change.enabled !== undefined ? { status: change.enabled ? "active" : "inactive" } : {}),
        ...(change.defaultRole !== undefined ? { defaultRole: change.defaultRole } : {}),
        ...(change.groupRoles !== undefined ? { groupRoles: change.groupRoles } : {}),
        ...(change.claimMapping !== undefined ? { claimMapping: change.claimMapping } : {}),
        updatedAt: now,
      })
      .where(and(eq(ssoConnections.id, locked.id), eq(ssoConnections.tenantId, ctx.tenantId)))
      .returning();
    if (!updated) throw new Error("the connection update returned no row");
    await recordAudit(tx, txCtx, {
      action: "sso_connection.updated",
      target: { type: "sso_connection", id: updated.id },
      details: { fields, status: updated.status },
    });
    await emitEvent(tx, deps, {
      tenantId: ctx.tenantId,
      type: "sso_connection.updated",
      data: { connectionId: updated.id, type: updated.type, enabled: updated.status === "active", fields },
    });
    return updated;
  });
  return connectionView(deps, row);
}

/**
 * Removes one of the ctx tenant's connections (`DELETE /api/tenant/sso/connections/{id}`) with its
 * client secret and its sign-ins under way; its addresses are no longer routed. 402 without `sso`,
 * step-up, audited and announced (`sso_connection.deleted`).
 */
export async function deleteSsoConnection(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<void> {
  await withDatabase(deps, ctx, (db) => findConnectionRow(db, ctx, input.id));
  await assertFeature(deps, ctx, { feature: "sso" });
  await requireRecentSecondFactor(deps, ctx);
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    const row = await findConnectionRow(tx, ctx, input.id, true);
    await tx
      .delete(ssoConnections)
      .where(and(eq(ssoConnections.id, row.id), eq(ssoConnections.tenantId, ctx.tenantId)));
    if (row.clientSecretName)
      await tx
        .delete(tenantSecrets)
        .where(and(eq(tenantSecrets.tenantId, ctx.tenantId), eq(tenantSecrets.name, row.clientSecretName)));
    await recordAudit(tx, txCtx, {
      action: "sso_connection.deleted",
      target: { type: "sso_connection", id: row.id },
      details: { type: row.type },
    });
    await emitEvent(tx, deps, {
      tenantId: ctx.tenantId,
      type: "sso_connection.deleted",
      data: { connectionId: row.id, type: row.type },
    });
  });
}
