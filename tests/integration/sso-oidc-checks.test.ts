import { afterAll, beforeAll, expect, test } from "bun:test";
import * as client from "openid-client";
import { describeOidcFailure } from "../../src/sso/oidc/oidc-checks.ts";
import { type OidcPeer, startOidcPeer } from "../fixtures/oidc-provider.ts";

// What a real OpenID provider's refusals read as (docs/sso.md): a wrong client secret answers 401
// with a WWW-Authenticate challenge, which openid-client throws as its challenges, not as an
// `error` field; the test sign-in names the client credentials, not "a challenge in the header".
let peer: OidcPeer;
beforeAll(async () => {
  peer = await startOidcPeer({ redirectUri: "http://127.0.0.1:1/api/auth/sso/oidc/callback" });
});
afterAll(() => peer?.stop());

test("a wrong client secret at a real provider reads as the client credentials refused", async () => {
  const config = await client.discovery(
    new URL(peer.issuer),
    peer.clientId,
    undefined,
    client.ClientSecretBasic("not-the-secret"),
    { execute: [client.allowInsecureRequests] },
  );
  let thrown: unknown;
  try {
    await client.refreshTokenGrant(config, "any-refresh-token");
  } catch (error) {
    thrown = error;
  }
  expect((thrown as { code?: string } | undefined)?.code).toBe("OAUTH_WWW_AUTHENTICATE_CHALLENGE");
  expect(describeOidcFailure(thrown)).toEqual({
    check: "client_credentials",
    ok: false,
    detail: "The provider refused the client id or secret (invalid_client): check both.",
  });
});
