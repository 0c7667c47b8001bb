import type { Context, MiddlewareHandler, Next } from "hono";
import type { Settings } from "../../config/schema.ts";
import { AppError } from "../../errors.ts";
import { parseHostHeader } from "../../tenancy/hostnames.ts";
import { createHostPolicy } from "../../tenancy/hosts.ts";
import type { TenantLookup } from "../../tenancy/tenant-lookup.ts";
import { forwardedFrom, trustedProxies } from "../client-ip.ts";
import type { AppEnv, ResolvedTenant } from "../request-context.ts";

/**
 * Paths every host may reach: a TLS edge asks for permission
 * (custom-domains/get-tls-permission.ts) by IP before any certificate exists. (The health probes
 * are mounted in front of this middleware: app.ts.)
 */
const HOST_EXEMPT = new Set(["/api/tls/permission"]);
export const TENANT_CODE_HEADER = "x-tenant";

/**
 * The tenant an unknown tenant code resolves to: an id no row has (the nil UUID), so every lookup
 * in it finds nothing and every authenticated route answers 404, as for another tenant.
 */
export const UNKNOWN_TENANT_ID = "00000000-0000-0000-0000-000000000000";
export function unknownTenant(code: string): ResolvedTenant {
  return { id: UNKNOWN_TENANT_ID, code: code.toLowerCase() };
}

/** Is a tenant code accepted on this path (`Tenancy:Resolution:TenantCodePaths`, prefixes)? */
export function tenantCodeAllowed(paths: readonly string[], path: string): boolean {
  return paths.some((prefix) => path === prefix.replace(/\/$/, "") || path.startsWith(prefix));
}

/**
 * The request's host name, or null for a missing, empty or malformed value (a 400, never a thrown
 * URL error): the one hostname parser (`parseHostHeader`, src/tenancy/hostnames.ts), as for
 * registration, TLS permission and the gateway. Names under `.invalid` (RFC 6761) are refused
 * too: `bunServeOptions` gives a request that came without a usable Host such a URL, so it can be
 * routed and answered.
 */
export function hostOf(value: string | null | undefined): string | null {
  if (!value) return null;
  let host = parsedHosts.get(value);
  if (host === undefined) {
    const parsed = parseHostHeader(value.trim());
    host = !parsed || parsed === "invalid" || parsed.endsWith(".invalid") ? null : parsed;
    // first in, first out: a flood of made-up names costs one parse each and keeps the map bounded
    if (parsedHosts.size >= PARSED_HOSTS_MAX) parsedHosts.delete(parsedHosts.keys().next().value as string);
    parsedHosts.set(value, host);
  }
  return host;
}

/**
 * Host values already parsed: the strict parser costs 1.5–8 µs a name (scripts, IDNA, denylists)
 * against ~0.05 µs for a map hit, and nearly every request repeats one of a few hosts.
 */
const parsedHosts = new Map<string, string | null>();
const PARSED_HOSTS_MAX = 1_024;

/** The host of an absolute request URL (`app.request` in tests sends no Host header), or null. */
function urlHost(url: string): string | null {
  if (!URL.canParse(url)) return null;
  return new URL(url).host;
}

/**
 * Resolves the host and the tenant of a request:
 * - the host is `Host`, or `X-Forwarded-Host` when the socket peer is a trusted proxy;
 * - a configured host (AllowedHosts, the platform host) acts as the platform: a tenant code
 *   (`X-Tenant` header or `?tenant=`) is accepted only on `TenantCodePaths` and refused elsewhere;
 *   an unknown code resolves to `unknownTenant` (no users, nothing found), never to a 404 that
 *   would tell which codes exist;
 * - an Active tenant domain resolves to its tenant;
 * - any other host gets 400 `host_not_allowed`.
 */
export function resolveTenancy(input: TenancyInput): MiddlewareHandler<AppEnv> {
  return tenancyResolver(input).middleware;
}

interface TenancyInput {
  settings: Settings;
  environment: string;
  lookup: TenantLookup;
}

/**
 * The host check and tenant resolution of `resolveTenancy`, with the two pieces it decides by
 * (`hostOfRequest`, `isPlatformHost`) for the edge's fast lane (src/http/fast-lane.ts), which serves
 * only a request on the platform host without a tenant code and leaves any other to this middleware.
 */
export function tenancyResolver(input: TenancyInput) {
  const { Resolution } = input.settings.Tenancy;
  const trusted = trustedProxies(Resolution.TrustedProxies);
  const policy = createHostPolicy({
    allowedHosts: input.settings.AllowedHosts,
    platformHost: Resolution.PlatformHost,
    environment: input.environment,
  });
  /** The request's host (`hostOf`): a trusted proxy's X-Forwarded-Host, else Host, else the URL's. */
  const hostOfRequest = (headers: Headers, url: string, peerAddress: () => string | undefined) =>
    hostOf(
      forwardedFrom(headers, peerAddress, trusted, "x-forwarded-host") ?? headers.get("host") ?? urlHost(url),
    );
  // an unknown code must not be told apart from a known one: the request goes on in a tenant that
  // has no users (sign-in then fails like a wrong password, SMS answers 202)
  const byCode = async (c: Context<AppEnv>, next: Next, code: string) => {
    c.set("tenant", (await input.lookup.byCode(code)) ?? unknownTenant(code));
    return next();
  };
  const byDomain = async (c: Context<AppEnv>, next: Next, host: string) => {
    const tenant = await input.lookup.byDomain(host);
    if (!tenant) throw new AppError("host_not_allowed", "This host is not served here.");
    c.set("tenant", tenant);
    return next();
  };
  // a plain function: the platform's host without a tenant code (most requests) goes on without an await
  const middleware: MiddlewareHandler<AppEnv> = (c, next) => {
    if (HOST_EXEMPT.has(c.req.path)) return next();
    const host = hostOfRequest(c.req.raw.headers, c.req.url, () => c.env?.peerAddress);
    if (!host) throw new AppError("host_not_allowed", "The request has no usable Host.");
    c.set("host", host);

    const code = c.req.header(TENANT_CODE_HEADER) ?? c.req.query("tenant");
    if (policy.isPlatformHost(host)) {
      if (code) {
        if (!tenantCodeAllowed(Resolution.TenantCodePaths, c.req.path)) {
          throw new AppError("bad_request", "A tenant code is not accepted on this path.");
        }
        return byCode(c, next, code);
      }
      return next();
    }
    return byDomain(c, next, host);
  };
  return { middleware, hostOfRequest, isPlatformHost: (host: string) => policy.isPlatformHost(host) };
}
