/**
 * The scopes a tenant API key may hold (docs/api-keys.md). A key has no role: each tenant route
 * declares the scope it needs, or that no key may call it (`apiRoute`'s access, src/http/access.ts;
 * the list by route is docs/roles.md).
 */

export const apiKeyScopes = [
  "users:read",
  "users:write",
  "users:*",
  "users:admin",
  "domains:read",
  "domains:write",
  "domains:*",
  "storage:*",
  "webhooks:*",
] as const;
export type ApiKeyScope = (typeof apiKeyScopes)[number];

/** Scopes that grant others too: `area:*` is every scope of the area but `users:admin`. */
const GRANTS: Record<ApiKeyScope, readonly ApiKeyScope[]> = {
  "users:read": ["users:read"],
  "users:write": ["users:write"],
  "users:*": ["users:*", "users:read", "users:write"],
  // dedicated: no `users:*` grants it, so a key that creates users was made to (docs/api-keys.md)
  "users:admin": ["users:admin"],
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

/**
 * What a key must hold to create or change a member: every scope a member's routes take (the
 * storage; the features every key reads). A key never creates or changes a principal with more
 * power than itself (docs/api-keys.md); tests/integration/route-security.test.ts checks this list
 * against the routes a member reaches.
 */
export const MEMBER_REACH: readonly ApiKeyScope[] = ["storage:*"];

/** Whether a key holding `scopes` reaches everything a member does (`MEMBER_REACH`). */
export function scopesReachMember(scopes: readonly string[]): boolean {
  return MEMBER_REACH.every((scope) => scopesGrant(scopes, scope));
}
