import { beforeAll, describe, expect, test } from "bun:test";
import { createHmac, createPrivateKey, generateKeyPairSync } from "node:crypto";
import { exportJWK, importPKCS8, SignJWT } from "jose";
import { ManualClock } from "../../src/clock.ts";
import { createTestApp, relaxedLimits, settingsEnv, type TestApp, useTestApp } from "../helpers/app.ts";
import { bearer, loginTokens, readyPlatformUser, signedInPlatformAdmin } from "../helpers/identity.ts";
import { rsaKeys } from "../helpers/production-env.ts";

const k1 = rsaKeys();
const k2 = rsaKeys();
const attacker = rsaKeys();
const ISS = "https://auth.test";
const AUD = "plinth-test";

const jwtEnv = (current: "k1" | "k2", verification: ("k1" | "k2")[]) => {
  const keys = { k1, k2 };
  const env: Record<string, string> = {
    Security__Jwt__Issuer: ISS,
    Security__Jwt__Audience: AUD,
    Security__Jwt__CurrentKeyId: current,
    Security__Jwt__PrivateKey: keys[current].privateKeyPem,
    ...settingsEnv(relaxedLimits),
  };
  verification.forEach((kid, i) => {
    env[`Security__Jwt__VerificationKeys__${i}__KeyId`] = kid;
    env[`Security__Jwt__VerificationKeys__${i}__PublicKey`] = keys[kid].publicKeyPem;
  });
  return env;
};

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

const clock = new ManualClock();
let valid: string;
let claims: Record<string, unknown>;

const app = useTestApp({ env: jwtEnv("k1", ["k1"]), clock });
const t = app.testDatabase;
beforeAll(async () => {
  valid = (await signedInPlatformAdmin(app)).accessToken;
  claims = JSON.parse(Buffer.from(valid.split(".")[1] ?? "", "base64url").toString());
});

const me = (token: string, a: TestApp = app) => a.request("/api/auth/me", bearer(token));

async function sign(
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  pem = k1.privateKeyPem,
) {
  const key = await importPKCS8(pem, "RS256");
  // typed as an access token, so each case below is refused for its own reason
  return new SignJWT(payload).setProtectedHeader({ alg: "RS256", typ: "at+jwt", ...header }).sign(key);
}

describe("a valid token", () => {
  test("is accepted and carries the current kid", async () => {
    expect((await me(valid)).status).toBe(200);
    const header = JSON.parse(Buffer.from(valid.split(".")[0] ?? "", "base64url").toString());
    expect(header).toMatchObject({ alg: "RS256", kid: "k1", typ: "at+jwt" });
    expect(claims).toMatchObject({ iss: ISS, aud: AUD, proles: ["platform_admin"] });
  });
});

describe("the JWT attack suite: every forged or stale token is 401", () => {
  const cases: [string, () => Promise<string>][] = [
    ["alg none", async () => `${b64url({ alg: "none", typ: "JWT", kid: "k1" })}.${b64url(claims)}.`],
    [
      "HS256 signed with the RSA public key",
      async () => {
        const head = `${b64url({ alg: "HS256", typ: "JWT", kid: "k1" })}.${b64url(claims)}`;
        const sig = createHmac("sha256", k1.publicKeyPem).update(head).digest("base64url");
        return `${head}.${sig}`;
      },
    ],
    ["unknown kid", () => sign({ kid: "nope" }, claims)],
    ["injected kid (path)", () => sign({ kid: "../../../../dev/null" }, claims)],
    ["injected kid (SQL)", () => sign({ kid: "k1' OR '1'='1" }, claims)],
    ["no kid", () => sign({}, claims)],
    [
      "expired",
      () => sign({ kid: "k1" }, { ...claims, exp: Math.floor(clock.now().getTime() / 1000) - 120 }),
    ],
    [
      "nbf in the future",
      () => sign({ kid: "k1" }, { ...claims, nbf: Math.floor(clock.now().getTime() / 1000) + 600 }),
    ],
    ["wrong issuer", () => sign({ kid: "k1" }, { ...claims, iss: "https://evil.test" })],
    ["wrong audience", () => sign({ kid: "k1" }, { ...claims, aud: "someone-else" })],
    [
      "tampered payload (roles added, original signature)",
      async () => {
        const [h, , s] = valid.split(".");
        return `${h}.${b64url({ ...claims, roles: ["owner"], proles: ["platform_admin", "root"] })}.${s}`;
      },
    ],
    ["signed by an attacker key with our kid", () => sign({ kid: "k1" }, claims, attacker.privateKeyPem)],
    [
      "jku pointing at the attacker's key set",
      () => sign({ kid: "attacker", jku: "https://evil.test/jwks.json" }, claims, attacker.privateKeyPem),
    ],
    [
      "x5u pointing at the attacker's certificate",
      () => sign({ kid: "k1", x5u: "https://evil.test/cert.pem" }, claims, attacker.privateKeyPem),
    ],
    [
      "embedded jwk of the attacker",
      async () => {
        const jwk = await exportJWK(createPrivateKey(attacker.privateKeyPem));
        const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = jwk;
        return sign({ kid: "k1", jwk: publicJwk }, claims, attacker.privateKeyPem);
      },
    ],
    ["garbage", async () => "not.a.jwt"],
    ["empty signature", async () => `${valid.split(".").slice(0, 2).join(".")}.`],
  ];
  for (const [name, make] of cases) {
    test(name, async () => {
      const response = await me(await make());
      expect(response.status).toBe(401);
      expect(response.headers.get("content-type")).toStartWith("application/problem+json");
      expect(response.headers.get("www-authenticate")).toStartWith(
        'Bearer realm="plinth", error="invalid_token"',
      );
    });
  }

  test("a malformed Authorization header is 401", async () => {
    expect((await app.request("/api/auth/me", { headers: { authorization: "Basic abc" } })).status).toBe(401);
    expect((await app.request("/api/auth/me")).status).toBe(401);
  });

  test("expiry honours only a small clock tolerance", async () => {
    const token = (await loginTokens(app, { email: (await readyPlatformUser(t.database.db)).email }))
      .accessToken;
    clock.advance(15 * 60_000 + 20_000); // past exp, within the 30 s tolerance
    expect((await me(token)).status).toBe(200);
    clock.advance(20_000); // past the tolerance
    expect((await me(token)).status).toBe(401);
  });
});

describe("key rotation", () => {
  test("old tokens verify while the old key is in the set; new tokens carry the new kid; a removed key is refused", async () => {
    const staff = await readyPlatformUser(t.database.db);
    const old = (await loginTokens(app, { email: staff.email })).accessToken;
    // step 1 done everywhere: k2 published; step 2: k2 signs, k1 still verifies
    const rotated = await createTestApp({ database: t.database, env: jwtEnv("k2", ["k1", "k2"]), clock });
    expect((await me(old, rotated)).status).toBe(200);
    const fresh = (await loginTokens(rotated, { email: staff.email })).accessToken;
    expect(JSON.parse(Buffer.from(fresh.split(".")[0] ?? "", "base64url").toString()).kid).toBe("k2");
    expect((await me(fresh, rotated)).status).toBe(200);
    // step 3: k1 removed from the set
    const finished = await createTestApp({ database: t.database, env: jwtEnv("k2", ["k2"]), clock });
    expect((await me(old, finished)).status).toBe(401);
    expect((await me(fresh, finished)).status).toBe(200);
  });

  test("JWKS publishes every verification key: kid, alg, use, and no private parts", async () => {
    const rotated = await createTestApp({ database: t.database, env: jwtEnv("k2", ["k1", "k2"]), clock });
    const response = await rotated.request("/.well-known/jwks.json");
    expect(response.status).toBe(200);
    const { keys } = (await response.json()) as { keys: Record<string, string>[] };
    expect(keys.map((k) => k.kid).sort()).toEqual(["k1", "k2"]);
    for (const key of keys) {
      expect(key).toMatchObject({ kty: "RSA", alg: "RS256", use: "sig" });
      for (const secret of ["d", "p", "q", "dp", "dq", "qi"]) expect(key[secret]).toBeUndefined();
    }
  });

  test("Development without keys signs with an ephemeral key and says so", async () => {
    const dev = await createTestApp({
      database: t.database,
      env: settingsEnv(relaxedLimits),
      clock,
    });
    expect(dev.logs.some((l) => l.includes("EPHEMERAL"))).toBe(true);
    const { keys } = (await (await dev.request("/.well-known/jwks.json")).json()) as {
      keys: { kid: string }[];
    };
    expect(keys[0]?.kid).toStartWith("dev-");
  });
});

test("a token signed by a key generated elsewhere with the same kid is refused", async () => {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  expect((await me(await sign({ kid: "k1" }, claims, pem))).status).toBe(401);
});
