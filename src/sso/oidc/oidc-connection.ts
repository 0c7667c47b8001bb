import * as client from "openid-client";
import type { SsoConnectionType } from "../connection-types.ts";
import { OIDC_ATTEMPT_PURPOSE, oidcCallbackUrl, oidcConfiguration } from "./oidc-configuration.ts";

/**
 * OpenID Connect: the authorization code flow with PKCE (S256), `state` and `nonce`; the nonce and
 * the PKCE verifier are sealed with data protection in the attempt. The callback is
 * `completeOidcSignIn` (oidc-callback.ts).
 */
export const oidcConnectionType: SsoConnectionType = {
  async start(deps, ctx, { connection, state, loginHint }) {
    const config = await oidcConfiguration(deps, ctx, connection);
    const verifier = client.randomPKCECodeVerifier();
    const nonce = client.randomNonce();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: oidcCallbackUrl(deps),
      scope: "openid email profile",
      response_type: "code",
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
      ...(loginHint ? { login_hint: loginHint } : {}),
    });
    const sealed = deps.dataProtection.forPurpose(OIDC_ATTEMPT_PURPOSE);
    return {
      redirectUrl: url.toString(),
      data: { nonce: await sealed.protect(nonce), verifier: await sealed.protect(verifier) },
    };
  },
};
