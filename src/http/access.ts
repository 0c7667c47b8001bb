import type { ApiKeyScope } from "../api-keys/scopes.ts";
import type { TenantRole } from "../identity/roles.ts";

/**
 * Who may call an operation, declared once on its route (`apiRoute(access, …)`, src/http/openapi.ts).
 * From it come the route's guard (src/http/middleware/guards.ts), its OpenAPI `security`, the role
 * matrix of tests/integration/route-security.test.ts and docs/roles.md (`bun run docs:roles`).
 *
 * - `public`: anyone, signed in or not;
 * - `probe`: a health probe (answers before the host check, CORS, the rate limits, the body limit);
 * - `signedIn`: any signed-in user or platform staff (a token or the browser session; no API key);
 * - `platform`: platform staff: `platform_viewer` reads (GET, HEAD), `platform_admin` every method;
 * - `tenantAccess(roles, { apiKey })`: a tenant's own users holding one of `roles` (or everyone in
 *   the tenant), and the tenant's API keys holding the scope named (`any`: every key; `none`: no key).
 */
export type Access = "public" | "probe" | "signedIn" | "platform" | TenantAccess;

/** What an API key needs: a scope, `any` (every key of the tenant) or `none` (keys may not call it). */
export type ApiKeyNeed = ApiKeyScope | "any" | "none";

export interface TenantAccess {
  readonly tenant: "everyone" | readonly TenantRole[];
  readonly apiKey: ApiKeyNeed;
}

/** A tenant route's access: the roles let through and the API-key scope it takes. */
export function tenantAccess(
  roles: "everyone" | readonly TenantRole[],
  keys: { apiKey: ApiKeyNeed },
): TenantAccess {
  return { tenant: roles, apiKey: keys.apiKey };
}

/** Whether API keys may call an operation of this access at all (its `security` lists `apiKey`). */
export const takesApiKey = (access: Access): access is TenantAccess =>
  typeof access === "object" && access.apiKey !== "none";

/** Whether the operation needs a caller: everything but the public routes and the probes. */
export const needsCaller = (access: Access): boolean => access !== "public" && access !== "probe";

/** A route of the app's route table with the access its guard declares (undefined: none declared). */
export interface DeclaredRoute {
  method: string;
  /** Hono's form: /api/tenant/domains/:id */
  path: string;
  access: Access | undefined;
}

/** The access each guard stands for: the guard is the declaration as the route table holds it. */
const declared = new WeakMap<object, Access>();

/** Marks `guard` as the one that checks `access` (guards.ts `guardOf` calls it). */
export function declareGuard<G extends object>(guard: G, access: Access): G {
  declared.set(guard, access);
  return guard;
}

/**
 * Every route of a route table (`app.routes`) once, with the access its guard declares; middleware
 * mounted on a pattern (`ALL`) is not a route. In the order the routes were registered.
 */
export function declaredRoutes(
  routes: readonly { method: string; path: string; handler: unknown }[],
): DeclaredRoute[] {
  const found = new Map<string, DeclaredRoute>();
  for (const { method, path, handler } of routes) {
    if (method === "ALL") continue;
    const key = `${method} ${path}`;
    const route = found.get(key) ?? { method, path, access: undefined };
    found.set(key, route);
    const access = typeof handler === "function" ? declared.get(handler) : undefined;
    if (access !== undefined) route.access ??= access;
  }
  return [...found.values()];
}

/** The routes under /api/ (and /.well-known/) that declare no access: `bun run docs:check` fails on each. */
export function undeclaredRoutes(routes: readonly DeclaredRoute[]): string[] {
  return routes
    .filter((route) => /^\/(api|\.well-known)(\/|$)/.test(route.path) && route.access === undefined)
    .map((route) => `${route.method} ${route.path}`);
}
