import * as client from "openid-client";
import type { Ctx } from "../../context.ts";
import { AppError } from "../../errors.ts";
import { takeSsoAttempt } from "../attempts.ts";
import { browserCheck } from "../browser-binding.ts";
import type { SsoCheck, SsoProfile } from "../connection-types.ts";
import { attemptCtx, failSsoSignIn, finishSsoSignIn, type SsoOutcome } from "../finish-sign-in.ts";
import type { SsoDeps } from "../sso-deps.ts";
import { describeOidcFailure } from "./oidc-checks.ts";
import {
  OIDC_ATTEMPT_PURPOSE,
  OIDC_CLOCK_TOLERANCE_S,
  oidcCallbackUrl,
  oidcConfiguration,
} from "./oidc-configuration.ts";

const ok = (check: string, detail: string): SsoCheck => ({ check, ok: true, detail });

/** The ID token checks openid-client made, once it accepted the token (they are listed for a test sign-in). */
const PASSED: SsoCheck[] = [
  ok("signature", "The ID token is signed with a key of the provider's JWKS."),
  ok("issuer", "The ID token's issuer (iss) is the connection's issuer."),
  ok("audience", "The ID token's audience (aud) is this connection's client id."),
  ok("clock", "The ID token is within its lifetime (exp, nbf) and was not issued in the future (iat)."),
  ok("nonce", "The ID token carries this sign-in's nonce."),
  ok("authorized_party", "The authorized party (azp), where given, is this connection's client id."),
];

function stringClaim(claims: Record<string, unknown>, name: string): string {
  const value = claims[name];
  return typeof value === "string" ? value : "";
}

/** `email`, `name` and `groups` as the connection's claim mapping names them (defaults: the standard claims). */
function profileOf(
  claims: Record<string, unknown>,
  mapping: { email?: string; name?: string; groups?: string },
): SsoProfile {
  const groups = claims[mapping.groups ?? "groups"];
  const amr = claims.amr;
  return {
    subject: stringClaim(claims, "sub"),
    email: stringClaim(claims, mapping.email ?? "email"),
    name: stringClaim(claims, mapping.name ?? "name"),
    groups: Array.isArray(groups)
      ? groups.filter((g): g is string => typeof g === "string").slice(0, 200)
      : [],
    amr: Array.isArray(amr) ? amr.filter((v): v is string => typeof v === "string").slice(0, 20) : [],
  };
}

/**
 * The OIDC redirect URI (`GET /api/auth/sso/oidc/callback`): takes the attempt its `state` names
 * (once), exchanges the code with the PKCE verifier and has openid-client validate the ID token
 * (signature on the discovered JWKS, `iss`, `aud`, `exp`, `nonce`, `azp`), then maps the claims and
 * finishes the sign-in. A provider that says the address is not verified (`email_verified: false`)
 * is refused. An unknown, spent or expired state is a 404.
 */
export async function completeOidcSignIn(
  deps: SsoDeps,
  ctx: Ctx,
  input: { query: URLSearchParams; browser: string | undefined },
): Promise<SsoOutcome> {
  const state = input.query.get("state");
  const taken = state ? await takeSsoAttempt(deps, ctx, { state, type: "oidc" }) : null;
  if (!state || !taken)
    throw new AppError("not_found", "This sign-in is unknown, expired or already finished: start it again.");
  const { attempt, connection } = taken;
  const tctx = attemptCtx(ctx, attempt);
  const failWith = (checks: SsoCheck[]) => failSsoSignIn(deps, tctx, { attempt, connection, checks });
  const bound = browserCheck(attempt, input.browser);
  if (!bound.ok) return failWith([bound]);
  const callback = new URL(oidcCallbackUrl(deps));
  for (const [name, value] of input.query) callback.searchParams.append(name, value);
  let config: client.Configuration;
  try {
    config = await oidcConfiguration(deps, tctx, connection);
  } catch (error) {
    return failWith([
      { check: "discovery", ok: false, detail: `The issuer could not be used: ${(error as Error).message}` },
    ]);
  }
  const sealed = deps.dataProtection.forPurpose(OIDC_ATTEMPT_PURPOSE);
  let claims: Record<string, unknown>;
  try {
    const tokens = await client.authorizationCodeGrant(config, callback, {
      pkceCodeVerifier: await sealed.unprotect(attempt.data.verifier ?? ""),
      expectedNonce: await sealed.unprotect(attempt.data.nonce ?? ""),
      expectedState: state,
      idTokenExpected: true,
    });
    claims = (tokens.claims() ?? {}) as Record<string, unknown>;
    // openid-client judges exp and nbf; an ID token issued ahead of Plinth's clock (iat beyond the
    // tolerance) is a clock skew too
    const issuedAt = claims.iat;
    if (typeof issuedAt === "number" && issuedAt > deps.clock.now().getTime() / 1000 + OIDC_CLOCK_TOLERANCE_S)
      return failWith([
        bound,
        {
          check: "clock",
          ok: false,
          detail:
            "The ID token was issued in the future (iat): check the clocks of the provider and of Plinth (clock skew).",
        },
      ]);
    // providers that keep the ID token small (and conforming ones for the code flow) give the
    // profile at the userinfo endpoint: its `sub` must be the ID token's
    const mapping = connection.claimMapping;
    const missing = [mapping.email ?? "email", mapping.name ?? "name", mapping.groups ?? "groups"].some(
      (name) => claims[name] === undefined,
    );
    if (missing && config.serverMetadata().userinfo_endpoint) {
      const info = await client.fetchUserInfo(config, tokens.access_token, String(claims.sub));
      claims = { ...info, ...claims };
    }
  } catch (error) {
    return failWith([describeOidcFailure(error)]);
  }
  const checks = [bound, ...PASSED];
  if (claims.email_verified === false) {
    checks.push({
      check: "email_verified",
      ok: false,
      detail: "The provider says the address is not verified (email_verified: false).",
    });
    return failWith(checks);
  }
  return finishSsoSignIn(deps, tctx, {
    attempt,
    connection,
    profile: profileOf(claims, connection.claimMapping),
    checks,
  });
}
