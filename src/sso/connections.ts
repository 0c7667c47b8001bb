import { X509Certificate } from "node:crypto";
import { and, eq, sql } from "drizzle-orm";
import type { TenantCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { creationOrder } from "../db/keyset.ts";
import { withDatabase } from "../db/operation.ts";
import { ssoConnections } from "../db/schema/sso.ts";
import { AppError } from "../errors.ts";
import { createdAtPosition, cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import { isUuid } from "../tenancy/tenants.ts";
import type { SsoConnectionRow } from "./connection-types.ts";
import { oidcCallbackUrl } from "./oidc/oidc-configuration.ts";
import {
  DEFAULT_ATTRIBUTE_MAPPING,
  type SamlSettings,
  serviceProviderOf,
} from "./saml/saml-service-provider.ts";
import type { SsoDeps } from "./sso-deps.ts";

export type TenantRoleName = SsoConnectionRow["defaultRole"];

/** One of the IdP's signing certificates as the API shows it (never the key material twice over). */
export interface CertificateView {
  fingerprint: string | null;
  notAfter: string | null;
}

/** A connection as the API shows it: never the client secret, only that one is set. */
export interface SsoConnectionView {
  id: string;
  type: SsoConnectionRow["type"];
  name: string;
  enabled: boolean;
  oidc: { issuer: string; clientId: string; clientSecretSet: boolean; redirectUri: string } | null;
  saml: {
    idpEntityId: string;
    idpSsoUrl: string;
    metadataUrl: string | null;
    certificates: CertificateView[];
    spEntityId: string;
    acsUrl: string;
    spMetadataPath: string;
  } | null;
  defaultRole: TenantRoleName;
  groupRoles: Record<string, TenantRoleName>;
  claimMapping: { email: string; name: string; groups: string };
  createdAt: string;
  updatedAt: string;
}

function certificateView(pem: string): CertificateView {
  try {
    const certificate = new X509Certificate(pem);
    return { fingerprint: certificate.fingerprint256, notAfter: new Date(certificate.validTo).toISOString() };
  } catch {
    return { fingerprint: null, notAfter: null };
  }
}

/** The secret name a connection's OIDC client secret is sealed under (tenant secrets). */
export const clientSecretName = (connectionId: string) => `sso.${connectionId}.client_secret`;

export function connectionView(deps: Pick<SsoDeps, "config">, row: SsoConnectionRow): SsoConnectionView {
  const saml = row.type === "saml" ? (row.settings as unknown as SamlSettings) : null;
  const sp = saml ? serviceProviderOf(deps.config.settings, row.id) : null;
  return {
    id: row.id,
    type: row.type,
    name: row.name,
    enabled: row.status === "active",
    oidc:
      row.type === "oidc"
        ? {
            issuer: row.issuer ?? "",
            clientId: row.clientId ?? "",
            clientSecretSet: row.clientSecretName !== null,
            redirectUri: oidcCallbackUrl(deps),
          }
        : null,
    saml:
      saml && sp
        ? {
            idpEntityId: saml.idpEntityId,
            idpSsoUrl: saml.idpSsoUrl,
            metadataUrl: saml.metadataUrl,
            certificates: saml.idpCertificates.map(certificateView),
            spEntityId: sp.entityId,
            acsUrl: sp.acsUrl,
            spMetadataPath: `/api/tenant/sso/connections/${row.id}/saml-metadata`,
          }
        : null,
    defaultRole: row.defaultRole,
    groupRoles: row.groupRoles,
    claimMapping: { ...DEFAULT_ATTRIBUTE_MAPPING, ...row.claimMapping },
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export const connectionNotFound = () =>
  new AppError("not_found", "No single sign-on connection with this id.");

/** One of the ctx tenant's connections (`lock`: for update, in a transaction); 404 for any other id. */
export async function findConnectionRow(
  db: Executor,
  ctx: TenantCtx,
  id: string,
  lock = false,
): Promise<SsoConnectionRow> {
  if (!isUuid(id)) throw connectionNotFound();
  const query = db
    .select()
    .from(ssoConnections)
    .where(and(eq(ssoConnections.id, id), eq(ssoConnections.tenantId, ctx.tenantId)));
  const [row] = lock ? await query.for("update") : await query;
  if (!row) throw connectionNotFound();
  return row;
}

/** One of the ctx tenant's connections (`GET /api/tenant/sso/connections/{id}`). */
export async function getSsoConnection(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<SsoConnectionView> {
  const row = await withDatabase(deps, ctx, (db) => findConnectionRow(db, ctx, input.id));
  return connectionView(deps, row);
}

/** Where a page of connections ends: the last one's creation time (PostgreSQL's exact text) and id. */
const connectionCursor = cursorCodec(createdAtPosition);

/** The ctx tenant's connections, newest first, a page at a time (`GET /api/tenant/sso/connections`). */
export async function listSsoConnections(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<SsoConnectionView>> {
  const after = connectionCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(ssoConnections, "desc", after);
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select({ row: ssoConnections, position: keyset.position })
      .from(ssoConnections)
      .where(and(eq(ssoConnections.tenantId, ctx.tenantId), keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    ({ row }) => connectionView(deps, row),
    ({ row, position }) => ({ createdAt: position, id: row.id }),
    connectionCursor,
  );
}

/**
 * Whether the ctx tenant has an enabled connection other than `exceptId` (one is routed to at a
 * time). In a transaction: takes the tenant's connection lock first, so two changes at once cannot
 * both enable one.
 */
export async function otherEnabledConnection(
  db: Executor,
  ctx: TenantCtx,
  exceptId?: string,
): Promise<boolean> {
  await db.execute(
    sql`select pg_advisory_xact_lock(hashtextextended(${`sso_connections:${ctx.tenantId}`}, 0))`,
  );
  const rows = await db
    .select({ id: ssoConnections.id })
    .from(ssoConnections)
    .where(and(eq(ssoConnections.tenantId, ctx.tenantId), eq(ssoConnections.status, "active")));
  return rows.some((row) => row.id !== exceptId);
}

export const oneEnabledOnly = () =>
  new AppError(
    "conflict",
    "Another connection of this tenant is enabled: disable it first (discovery routes to one connection).",
  );
