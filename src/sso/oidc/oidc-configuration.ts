import * as client from "openid-client";
import type { TenantCtx } from "../../context.ts";
import { withDatabase } from "../../db/operation.ts";
import { publicBaseUrl } from "../../email/links.ts";
import { AppError } from "../../errors.ts";
import { readTenantSecret } from "../../providers/tenant-secret-store.ts";
import type { SsoConnectionRow } from "../connection-types.ts";
import type { SsoDeps } from "../sso-deps.ts";

/** The OIDC redirect URI of every connection: `<Server:PublicBaseUrl>/api/auth/sso/oidc/callback`. */
export const OIDC_CALLBACK_PATH = "/api/auth/sso/oidc/callback";
export const oidcCallbackUrl = (deps: Pick<SsoDeps, "config">): string =>
  `${publicBaseUrl(deps.config.settings)}${OIDC_CALLBACK_PATH}`;

/** Discovered provider metadata is kept this long per connection (and version) in the process. */
const DISCOVERY_TTL_MS = 5 * 60_000;
const discovered = new Map<string, { at: number; server: client.ServerMetadata }>();

/** The data-protection purpose of an attempt's OIDC values (nonce, PKCE verifier). */
export const OIDC_ATTEMPT_PURPOSE = "sso-oidc-attempt";

/**
 * The openid-client configuration of a connection: the issuer's discovery document (cached per
 * connection version for a few minutes), the client id, and the client secret opened from the
 * tenant's secrets (client_secret_basic). Times are judged by the injected clock. Plain-http
 * issuers are allowed only in Development.
 */
export async function oidcConfiguration(
  deps: SsoDeps,
  ctx: TenantCtx,
  connection: SsoConnectionRow,
): Promise<client.Configuration> {
  if (!connection.issuer || !connection.clientId || !connection.clientSecretName)
    throw new AppError("bad_request", "The connection lacks its issuer, client id or client secret.");
  const keyring = deps.tenantSecretKeyring;
  if (!keyring)
    throw new AppError("unavailable", "Tenant secrets are not configured (Security:TenantSecrets).");
  const key = `${connection.id}:${connection.updatedAt.getTime()}`;
  const nowMs = deps.clock.now().getTime();
  const secretName = connection.clientSecretName;
  const secret = await withDatabase(deps, ctx, (db) =>
    readTenantSecret(db, keyring, ctx.tenantId, secretName),
  );
  if (secret === null) throw new AppError("bad_request", "The connection's client secret is missing.");
  const insecure = deps.config.environment === "Development" && connection.issuer.startsWith("http:");
  const customFetch: client.CustomFetch = (url, options) =>
    deps.fetch(url, { ...options, signal: AbortSignal.timeout(10_000) } as RequestInit);
  const hit = discovered.get(key);
  let server = hit && nowMs - hit.at < DISCOVERY_TTL_MS ? hit.server : undefined;
  if (!server) {
    const found = await client.discovery(
      new URL(connection.issuer),
      connection.clientId,
      undefined,
      client.ClientSecretBasic(secret),
      { execute: insecure ? [client.allowInsecureRequests] : [], [client.customFetch]: customFetch },
    );
    server = found.serverMetadata();
    discovered.set(key, { at: nowMs, server });
    for (const [k, v] of discovered) if (nowMs - v.at >= DISCOVERY_TTL_MS) discovered.delete(k);
  }
  const config = new client.Configuration(
    server,
    connection.clientId,
    {
      // judge exp, nbf and iat by Plinth's clock (tests inject one): openid-client adds this skew to its own now
      [client.clockSkew]: Math.floor(nowMs / 1000) - Math.floor(Date.now() / 1000),
      [client.clockTolerance]: 60,
    },
    client.ClientSecretBasic(secret),
  );
  config[client.customFetch] = customFetch;
  if (insecure) client.allowInsecureRequests(config);
  return config;
}
