import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant, createUser, json, login } from "../helpers/identity.ts";

/**
 * #16 point 6 and #17 point 4 over HTTP: a stranger hammering an account from one address gets that
 * address slowed and refused, the owner signing in from elsewhere does not; each window is an
 * advertised `RateLimit-Policy` and its 429 names it in `RateLimit`. Default window settings.
 */
const clock = new ManualClock("2026-11-23T10:00:00Z");
const app = useTestApp({
  clock,
  cache: "auth-windows",
  env: { RateLimiting__Auth__PermitLimit: "100000" },
});
const t = app.testDatabase;

const PASSWORD_POLICIES = [
  '"password-address";q=5;w=900',
  '"password-account";q=100;w=900',
  '"password-ip";q=50;w=900',
];

const policiesOf = (response: Response) =>
  (response.headers.get("ratelimit-policy") ?? "").split(",").map((entry) => entry.trim());

describe("no lockout by strangers", () => {
  test("five wrong passwords from A: A is slowed then refused; the owner from B gets in, A still gets 429", async () => {
    const tenant = await createTenant(t.database.db);
    const owner = await createUser(t.database.db, tenant.id, { role: "owner" });
    const A = "203.0.113.66";
    const B = "192.0.2.77";
    const wrong = () =>
      login(app, { email: owner.email, tenant: tenant.code, password: "wrong-guess-0001" }, { peer: A });

    for (let i = 0; i < 3; i++) expect((await wrong()).status).toBe(401);
    // slowed: the 4th must wait 1 s after the 3rd, the 5th 2 s after the 4th
    const slowed = await wrong();
    expect(slowed.status).toBe(429);
    expect(slowed.headers.get("retry-after")).toBe("1");
    expect(slowed.headers.get("ratelimit")).toBe('"password-address";r=0;t=1');
    clock.advance(1_000);
    expect((await wrong()).status).toBe(401);
    expect((await wrong()).headers.get("retry-after")).toBe("2");
    clock.advance(2_000);
    expect((await wrong()).status).toBe(401);
    // five failures: the address is refused for the rest of the window (900 s from the first)
    clock.advance(10_000);
    const refused = await wrong();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("887");
    expect(refused.headers.get("ratelimit")).toBe('"password-address";r=0;t=887');
    expect(policiesOf(refused)).toEqual(expect.arrayContaining(PASSWORD_POLICIES));
    // the refusing policy is one of the advertised ones
    const named = /^"([^"]+)"/.exec(refused.headers.get("ratelimit") ?? "")?.[1];
    expect(policiesOf(refused).some((entry) => entry.startsWith(`"${named}";`))).toBe(true);

    // the owner, from another address, signs in; the response lists the policies it counts against
    const fromB = await login(app, { email: owner.email, tenant: tenant.code }, { peer: B });
    expect(fromB.status).toBe(200);
    expect(policiesOf(fromB)).toEqual(
      expect.arrayContaining(['"global";q=600;w=60', '"auth";q=100000;w=60', ...PASSWORD_POLICIES]),
    );
    // A, even with the right password, is still refused
    const fromA = await login(app, { email: owner.email, tenant: tenant.code }, { peer: A });
    expect(fromA.status).toBe(429);
    expect(fromA.headers.get("ratelimit")).toStartWith('"password-address";r=0;');
    // and the window's end lets A in again
    clock.advance(900_000);
    expect((await login(app, { email: owner.email, tenant: tenant.code }, { peer: A })).status).toBe(200);
  });

  test("the SMS endpoints advertise their windows and a refusal names the window", async () => {
    const tenant = await createTenant(t.database.db);
    const phone = "+14155550199";
    const ip = "198.51.100.99";
    const verify = () =>
      app.request("/api/auth/sms/verify", json({ phone, code: "000000", tenant: tenant.code }), ip);
    for (let i = 0; i < 5; i++) {
      const answer = await verify();
      expect(answer.status).toBe(401);
      expect(policiesOf(answer)).toEqual(
        expect.arrayContaining(['"sms-verify-phone";q=5;w=900', '"sms-verify-ip";q=30;w=900']),
      );
    }
    const refused = await verify();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("ratelimit")).toBe('"sms-verify-phone";r=0;t=900');
    expect(refused.headers.get("retry-after")).toBe("900");
    const send = await app.request("/api/auth/sms/send", json({ phone, tenant: tenant.code }), ip);
    expect(policiesOf(send)).toEqual(
      expect.arrayContaining(['"sms-send-phone";q=3;w=900', '"sms-send-ip";q=20;w=900']),
    );
    await app.deps.pending.settled();
  });
});
