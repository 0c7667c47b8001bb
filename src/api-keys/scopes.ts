/**
 * The scopes a tenant API key may hold (docs/api-keys.md). A key has no role: each tenant route
 * declares the scope it needs, or that no key may call it (`apiRoute`'s access, src/http/access.ts;
 * the list by route is docs/roles.md).
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

/** Whether a key holding `scopes` has `needed` (itself, or the `area:*` that grants it). */
export function scopesGrant(scopes: readonly string[], needed: ApiKeyScope): boolean {
  return scopes.some((scope) => GRANTS[scope as ApiKeyScope]?.includes(needed));
}

/** The scopes that grant `needed`: itself and the `area:*` of its area. */
export function scopesGranting(needed: ApiKeyScope): ApiKeyScope[] {
  return apiKeyScopes.filter((scope) => GRANTS[scope].includes(needed));
}
