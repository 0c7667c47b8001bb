import { recordAudit } from "../audit/record.ts";
import { requireRecentSecondFactor } from "../auth/step-up.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { ssoConnections } from "../db/schema/sso.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { writeTenantSecret } from "../providers/tenant-secret-store.ts";
import type { TenantSecretKeyring } from "../security/tenant-secrets.ts";
import {
  clientSecretName,
  connectionView,
  oneEnabledOnly,
  otherEnabledConnection,
  type SsoConnectionView,
  type TenantRoleName,
} from "./connections.ts";
import { checkOidcIssuer } from "./oidc/oidc-issuer-check.ts";
import { samlSettingsFrom } from "./saml/saml-settings.ts";
import type { SsoDeps } from "./sso-deps.ts";

/** What every connection may be given, beside its protocol's fields. */
export interface ConnectionOptions {
  name?: string;
  enabled?: boolean;
  defaultRole?: TenantRoleName;
  groupRoles?: Record<string, TenantRoleName>;
  claimMapping?: { email?: string; name?: string; groups?: string };
}

export type NewSsoConnection = ConnectionOptions &
  (
    | { type: "oidc"; issuer: string; clientId: string; clientSecret: string }
    | { type: "saml"; metadataXml?: string; metadataUrl?: string }
  );

/** The keyring OIDC client secrets are sealed under (`Security:TenantSecrets`); 503 when not configured. */
export function secretKeyring(deps: SsoDeps): TenantSecretKeyring {
  if (!deps.tenantSecretKeyring)
    throw new AppError("unavailable", "Tenant secrets are not configured (Security:TenantSecrets).");
  return deps.tenantSecretKeyring;
}

/** A connection's protocol columns from what the caller gave: the issuer discovered, the metadata read. */
async function protocolColumns(deps: SsoDeps, input: NewSsoConnection) {
  if (input.type === "oidc") {
    const issuer = await checkOidcIssuer(deps, input.issuer);
    return { issuer, clientId: input.clientId, settings: {} };
  }
  const settings = await samlSettingsFrom(deps, input);
  return { issuer: null, clientId: null, settings: { ...settings } };
}

/**
 * Adds a single sign-on connection to the ctx tenant (`POST /api/tenant/sso/connections`): OIDC with
 * its issuer discovered now (422 naming `issuer` and what failed; 503 when unreachable) and its
 * client secret sealed as a tenant secret (never answered); SAML with its IdP metadata read and
 * checked (422 naming the field). Enabled unless asked otherwise or another connection is enabled
 * (409 when `enabled: true` meets one). 402 without `sso`; a recent second factor (step-up).
 * Audited (`sso_connection.created`) and announced (the `sso_connection.created` event).
 */
export async function createSsoConnection(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: NewSsoConnection,
): Promise<SsoConnectionView> {
  await assertFeature(deps, ctx, { feature: "sso" });
  await requireRecentSecondFactor(deps, ctx);
  const keyring = input.type === "oidc" ? secretKeyring(deps) : null;
  const columns = await protocolColumns(deps, input);
  const now = deps.clock.now();
  const id = crypto.randomUUID();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const another = await otherEnabledConnection(tx, ctx);
    if (input.enabled === true && another) throw oneEnabledOnly();
    const enabled = input.enabled ?? !another;
    if (keyring && input.type === "oidc")
      await writeTenantSecret(tx, keyring, ctx.tenantId, {
        name: clientSecretName(id),
        value: input.clientSecret,
        now,
      });
    const [inserted] = await tx
      .insert(ssoConnections)
      .values({
        id,
        tenantId: ctx.tenantId,
        type: input.type,
        name: input.name ?? "",
        status: enabled ? "active" : "inactive",
        ...columns,
        clientSecretName: keyring ? clientSecretName(id) : null,
        defaultRole: input.defaultRole ?? "member",
        groupRoles: input.groupRoles ?? {},
        claimMapping: input.claimMapping ?? {},
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    if (!inserted) throw new Error("the connection insert returned no row");
    await recordAudit(tx, txCtx, {
      action: "sso_connection.created",
      target: { type: "sso_connection", id },
      details: { type: inserted.type, status: inserted.status, issuer: inserted.issuer },
    });
    await emitEvent(tx, deps, {
      tenantId: ctx.tenantId,
      type: "sso_connection.created",
      data: { connectionId: id, type: inserted.type, enabled },
    });
    return inserted;
  });
  return connectionView(deps, row);
}
