import { beforeAll, describe, expect, test } from "bun:test";
import { createPublicKey, type webcrypto } from "node:crypto";
import { createVerifier } from "fast-jwt";
import { importPKCS8, SignJWT } from "jose";
import { ManualClock } from "../../src/clock.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { bearer, signedInPlatformAdmin } from "../helpers/identity.ts";
import { rsaKeys } from "../helpers/production-env.ts";

// RFC 9068 access tokens and RFC 6750 challenges, checked as a resource server from another
// library would check them.

const key = rsaKeys();
const ISS = "https://auth.test";
const AUD = "plinth-test";
const LIFETIME = 15 * 60;

const clock = new ManualClock();
/** The token service starts (and records its cut-over) when the app is built, before any advance. */
const startSeconds = Math.floor(clock.now().getTime() / 1000);
const app = useTestApp({
  env: {
    Security__Jwt__Issuer: ISS,
    Security__Jwt__Audience: AUD,
    Security__Jwt__CurrentKeyId: "k1",
    Security__Jwt__PrivateKey: key.privateKeyPem,
    Security__Jwt__AccessTokenMinutes: String(LIFETIME / 60),
  },
  settings: relaxedLimits,
  clock,
});

let token: string;
let claims: Record<string, unknown>;
beforeAll(async () => {
  token = (await signedInPlatformAdmin(app)).accessToken;
  claims = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString());
});

const me = (value: string) => app.request("/api/auth/me", bearer(value));

async function sign(typ: string | undefined, payload: Record<string, unknown>) {
  const signing = await importPKCS8(key.privateKeyPem, "RS256");
  return new SignJWT(payload).setProtectedHeader({ alg: "RS256", kid: "k1", typ }).sign(signing);
}

describe("access tokens are at+jwt (RFC 9068)", () => {
  test("a second library verifies an issued token against /.well-known/jwks.json, requiring at+jwt", async () => {
    const { keys } = (await (await app.request("/.well-known/jwks.json")).json()) as {
      keys: (webcrypto.JsonWebKey & { kid: string })[];
    };
    const pems = new Map(
      keys.map((jwk) => [
        jwk.kid,
        createPublicKey({ key: jwk, format: "jwk" }).export({ type: "spki", format: "pem" }).toString(),
      ]),
    );
    const verify = createVerifier({
      key: async (decoded: { header: { kid?: string } }) => pems.get(decoded.header.kid ?? "") ?? "",
      algorithms: ["RS256"],
      allowedIss: ISS,
      allowedAud: AUD,
      checkTyp: "at+jwt",
      clockTimestamp: clock.now().getTime(),
      requiredClaims: ["sub", "exp", "iat", "jti"],
    });
    const payload = (await verify(token)) as Record<string, unknown>;
    expect(payload.sub).toBe(claims.sub);
    expect(payload.exp).toBe((claims.iat as number) + LIFETIME);
    // and the same library refuses what it should: a JWT-typed token
    await expect(verify(await sign("JWT", claims))).rejects.toThrow();
  });

  test("a token without typ, or of another type, is refused with invalid_token", async () => {
    for (const typ of [undefined, "id+jwt", "JOSE"]) {
      const response = await me(await sign(typ, claims));
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toStartWith(
        'Bearer realm="plinth", error="invalid_token"',
      );
    }
    expect((await me(await sign("application/at+jwt", claims))).status).toBe(200);
  });

  test("typ JWT is accepted only when issued before the upgrade, for one lifetime at most", async () => {
    const before = { ...claims, iat: startSeconds - 60, nbf: startSeconds - 60, exp: startSeconds + 3600 };
    expect((await me(await sign("JWT", before))).status).toBe(200);
    // issued after this version started: an at+jwt issuer would have typed it
    const after = { ...claims, iat: startSeconds + 1, nbf: startSeconds + 1, exp: startSeconds + LIFETIME };
    expect((await me(await sign("JWT", after))).status).toBe(401);
    // one lifetime after its issue it is refused, whatever its exp (and the cached answer too)
    clock.advance((LIFETIME - 60 + 31) * 1000);
    const response = await me(await sign("JWT", before));
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toContain('error="invalid_token"');
  });
});

describe("401 challenges (RFC 6750 §3)", () => {
  test("no credentials: a bare challenge without an error code", async () => {
    const response = await app.request("/api/auth/me");
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toBe('Bearer realm="plinth"');
    const other = await app.request("/api/auth/me", { headers: { authorization: "Basic abc" } });
    expect(other.headers.get("www-authenticate")).toBe('Bearer realm="plinth"');
  });

  test("a bad or expired token: invalid_token with a description", async () => {
    const garbage = await me("not.a.jwt");
    expect(garbage.status).toBe(401);
    expect(garbage.headers.get("www-authenticate")).toBe(
      'Bearer realm="plinth", error="invalid_token", error_description="Invalid or expired token."',
    );
    const malformed = await app.request("/api/auth/me", { headers: { authorization: "Bearer a b" } });
    expect(malformed.headers.get("www-authenticate")).toContain('error="invalid_token"');
    clock.advance((LIFETIME + 60) * 1000);
    const expired = await me(token);
    expect(expired.status).toBe(401);
    expect(expired.headers.get("www-authenticate")).toContain('error="invalid_token"');
  });
});
