import type { SsoCheck } from "../connection-types.ts";

const fail = (check: string, detail: string): SsoCheck => ({ check, ok: false, detail });

/** The claim an openid-client error is about, where it names one. */
function claimOf(error: unknown): string | undefined {
  const cause = (error as { cause?: unknown }).cause;
  const claim = cause && typeof cause === "object" ? (cause as { claim?: unknown }).claim : undefined;
  return typeof claim === "string" ? claim : undefined;
}

/**
 * What failed, in words an operator can act on, from an openid-client error of the code exchange
 * or the ID token's validation (docs/sso.md lists them).
 */
/**
 * The OAuth error of a token endpoint that answered 401 with a `WWW-Authenticate` challenge (as
 * oidc-provider and others answer a wrong client secret under client_secret_basic, RFC 6749 §5.2):
 * openid-client then throws the challenges, not an `error` field. `invalid_client` when the
 * challenge names none.
 */
function challengeError(error: unknown): { error?: string; error_description?: string } | undefined {
  const e = error as { code?: string; cause?: unknown; status?: number };
  if (e.code !== "OAUTH_WWW_AUTHENTICATE_CHALLENGE") return undefined;
  const challenges = Array.isArray(e.cause) ? e.cause : [];
  const parameters =
    (challenges[0] as { parameters?: Record<string, unknown> } | undefined)?.parameters ?? {};
  const named = typeof parameters.error === "string" ? parameters.error : undefined;
  const description =
    typeof parameters.error_description === "string" ? parameters.error_description : undefined;
  return {
    error: named ?? (e.status === 401 ? "invalid_client" : undefined),
    ...(description ? { error_description: description } : {}),
  };
}

export function describeOidcFailure(error: unknown): SsoCheck {
  const e = {
    ...(error as { code?: string; error?: string; error_description?: string; message?: string }),
    ...challengeError(error),
  };
  const message = (error as { message?: string }).message ?? String(error);
  if (e.error === "invalid_client" || e.error === "unauthorized_client")
    return fail(
      "client_credentials",
      `The provider refused the client id or secret (${e.error}): check both.`,
    );
  if (e.error === "invalid_grant")
    return fail(
      "authorization_code",
      "The provider refused the authorization code (invalid_grant): it was used, expired, or the redirect URI differs.",
    );
  if (e.error)
    return fail(
      "provider",
      `The provider answered ${e.error}${e.error_description ? `: ${e.error_description}` : ""}.`,
    );
  switch (claimOf(error)) {
    case "aud":
      return fail(
        "audience",
        "The ID token's audience (aud) is not this connection's client id: wrong audience.",
      );
    case "iss":
      return fail("issuer", "The ID token's issuer (iss) is not the connection's issuer.");
    case "azp":
      return fail(
        "authorized_party",
        "The ID token's authorized party (azp) is not this connection's client id.",
      );
    case "nonce":
      return fail(
        "nonce",
        "The ID token's nonce is not the one this sign-in sent (a replayed or foreign token).",
      );
    case "exp":
      return fail(
        "clock",
        "The ID token has expired (exp): check the clocks of the provider and of Plinth (clock skew).",
      );
    case "nbf":
    case "iat":
      return fail(
        "clock",
        `The ID token is not valid yet (${claimOf(error)}): check the clocks of the provider and of Plinth (clock skew).`,
      );
  }
  if (/signature/i.test(message))
    return fail(
      "signature",
      "The ID token's signature does not verify with the provider's published keys (JWKS).",
    );
  if (/state/i.test(message)) return fail("state", "The state returned is not this sign-in's.");
  if (/discovery|issuer|metadata/i.test(message) || e.code === "OAUTH_INVALID_SERVER_METADATA")
    return fail("discovery", `The issuer's discovery document could not be used: ${message}.`);
  return fail("token", `The provider's answer was refused: ${message}.`);
}
