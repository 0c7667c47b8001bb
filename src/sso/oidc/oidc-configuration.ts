import * as client from "openid-client";
import { isFresh } from "../../clock.ts";
import type { TenantCtx } from "../../context.ts";
import { withDatabase } from "../../db/operation.ts";
import { publicBaseUrl } from "../../email/links.ts";
import { AppError } from "../../errors.ts";
import { readTenantSecret } from "../../providers/tenant-secret-store.ts";
import type { SsoConnectionRow } from "../connection-types.ts";
import { type ProviderFetchDeps, providerFetch } from "../provider-fetch.ts";
import type { SsoDeps } from "../sso-deps.ts";

/** The OIDC redirect URI of every connection: `<Server:PublicBaseUrl>/api/auth/sso/oidc/callback`. */
export const OIDC_CALLBACK_PATH = "/api/auth/sso/oidc/callback";
export const oidcCallbackUrl = (deps: Pick<SsoDeps, "config">): string =>
  `${publicBaseUrl(deps.config.settings)}${OIDC_CALLBACK_PATH}`;

/**
 * Discovered provider metadata is kept this long per connection (and version) in the process; a
 * document fetched while the clock read ahead of where it has since been put back is fetched again.
 */
const DISCOVERY_TTL_MS = 5 * 60_000;
const discovered = new Map<string, { at: number; server: client.ServerMetadata }>();

/** The data-protection purpose of an attempt's OIDC values (nonce, PKCE verifier). */
export const OIDC_ATTEMPT_PURPOSE = "sso-oidc-attempt";

/** Plain-http issuers are allowed only in Development (a local provider). */
const insecureIssuer = (deps: Pick<SsoDeps, "config">, issuer: string): boolean =>
  deps.config.environment === "Development" && issuer.startsWith("http:");

/** Every call to the provider goes through the provider guard (src/sso/provider-fetch.ts). */
const oidcFetch = (deps: ProviderFetchDeps): client.CustomFetch => {
  const guarded = providerFetch(deps);
  return (url, options) => guarded(url, options as RequestInit);
};

/** How far the provider's clock may be from Plinth's when exp, nbf and iat are judged (seconds). */
export const OIDC_CLOCK_TOLERANCE_S = 60;

/**
 * The issuer's discovery document (`<issuer>/.well-known/openid-configuration`), fetched through the
 * provider guard and checked by openid-client (its `issuer` must be the one asked for). Throws the
 * guard's `DestinationRefused`, `ProviderUnreachable`, or openid-client's error.
 */
export async function discoverIssuer(
  deps: ProviderFetchDeps & Pick<SsoDeps, "config">,
  issuer: string,
): Promise<client.ServerMetadata> {
  const found = await client.discovery(new URL(issuer), "plinth-discovery", undefined, client.None(), {
    execute: insecureIssuer(deps, issuer) ? [client.allowInsecureRequests] : [],
    [client.customFetch]: oidcFetch(deps),
  });
  return found.serverMetadata();
}

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
  const insecure = insecureIssuer(deps, connection.issuer);
  const customFetch = oidcFetch(deps);
  const hit = discovered.get(key);
  let server = hit && isFresh(hit.at, DISCOVERY_TTL_MS, nowMs) ? hit.server : undefined;
  if (!server) {
    server = await discoverIssuer(deps, connection.issuer);
    discovered.set(key, { at: nowMs, server });
    for (const [k, v] of discovered) if (!isFresh(v.at, DISCOVERY_TTL_MS, nowMs)) discovered.delete(k);
  }
  const config = new client.Configuration(
    server,
    connection.clientId,
    {
      // judge exp, nbf and iat by Plinth's clock (tests inject one): openid-client adds this skew to its own now
      [client.clockSkew]: Math.floor(nowMs / 1000) - Math.floor(Date.now() / 1000),
      [client.clockTolerance]: OIDC_CLOCK_TOLERANCE_S,
    },
    client.ClientSecretBasic(secret),
  );
  config[client.customFetch] = customFetch;
  if (insecure) client.allowInsecureRequests(config);
  return config;
}
