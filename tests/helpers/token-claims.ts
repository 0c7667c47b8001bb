/** A verified access token's claims as the token cache holds them (tests of `VerifiedTokens`). */
export const claims = (n: number) => ({
  userId: `user-${n}`,
  tenantId: null,
  sessionId: `session-${n}`,
  roles: [],
  platformRoles: ["platform_admin"],
  passwordChangeRequired: false,
  amr: ["pwd"],
  authTime: 1_795_000_000,
});
