/**
 * What a tenant API key may call (docs/api-keys.md, docs/roles.md). A key has no role: each tenant
 * route area names the scope a read (GET, HEAD) and a write (anything else) needs. A path outside
 * every area is closed to keys (fail closed: a new tenant route is refused to keys until it has an
 * entry here), and so are the API-key routes themselves, `/api/auth/*` and `/api/admin/*`.
 */

export const apiKeyScopes = [
  "users:read",
  "users:write",
  "users:*",
  "domains:read",
  "domains:write",
  "domains:*",
  "storage:*",
  "webhooks:*",
] as const;
export type ApiKeyScope = (typeof apiKeyScopes)[number];

/** Scopes that grant others too: `area:*` is every scope of the area. */
const GRANTS: Record<ApiKeyScope, readonly ApiKeyScope[]> = {
  "users:read": ["users:read"],
  "users:write": ["users:write"],
  "users:*": ["users:*", "users:read", "users:write"],
  "domains:read": ["domains:read"],
  "domains:write": ["domains:write"],
  "domains:*": ["domains:*", "domains:read", "domains:write"],
  "storage:*": ["storage:*"],
  "webhooks:*": ["webhooks:*"],
};

/** `any`: every key, whatever its scopes; null: no key. */
type Need = ApiKeyScope | "any" | null;

interface Area {
  /** The path itself and everything under it. */
  prefix: string;
  read: Need;
  write: Need;
}

/** The tenant route areas keys may use; the first matching prefix decides. */
export const API_KEY_AREAS: readonly Area[] = [
  { prefix: "/api/tenant/features", read: "any", write: null },
  { prefix: "/api/tenant/users", read: "users:read", write: "users:write" },
  { prefix: "/api/tenant/domains", read: "domains:read", write: "domains:write" },
  { prefix: "/api/tenant/storage", read: "storage:*", write: "storage:*" },
  { prefix: "/api/tenant/webhooks", read: "webhooks:*", write: "webhooks:*" },
];

const READS = new Set(["GET", "HEAD", "OPTIONS"]);

/** The scope a request needs: `any`, a scope, or null when no key may make it. */
export function scopeNeeded(method: string, path: string): Need {
  const area = API_KEY_AREAS.find((a) => path === a.prefix || path.startsWith(`${a.prefix}/`));
  if (!area) return null;
  return READS.has(method.toUpperCase()) ? area.read : area.write;
}

/** Whether a key holding `scopes` may make this request; `needs` names what it lacks. */
export function scopesAllow(
  scopes: readonly string[],
  method: string,
  path: string,
): { allowed: true } | { allowed: false; needs: ApiKeyScope | null } {
  const needs = scopeNeeded(method, path);
  if (needs === "any") return { allowed: true };
  if (needs === null) return { allowed: false, needs: null };
  const granted = scopes.some((scope) => GRANTS[scope as ApiKeyScope]?.includes(needs));
  return granted ? { allowed: true } : { allowed: false, needs };
}
