import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { users } from "../../src/db/schema/index.ts";
import { putTenantProvider } from "../../src/providers/tenant-providers.ts";
import { writeTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { parseTenantSecretKeys } from "../../src/security/tenant-secrets.ts";
import { type SmsGateway, startSmsGateway } from "../fixtures/sms-gateway.ts";
import { createTestApp, relaxedLimits, settingsEnv, useTestApp } from "../helpers/app.ts";
import { createTestDatabase } from "../helpers/database.ts";
import {
  bearer,
  createPlatformAdmin,
  createTenant,
  createUser,
  json,
  login,
  loginTokens,
  PASSWORD,
  readyPlatformUser,
  signedInTenant,
  type Tokens,
} from "../helpers/identity.ts";

const MASTER_KEY = randomBytes(32).toString("base64");
let sms: SmsGateway;
const clock = new ManualClock();

beforeAll(() => {
  sms = startSmsGateway();
});
afterAll(() => sms.stop());
const app = useTestApp({
  clock,
  settings: relaxedLimits,
  env: () => ({
    Authentication__Sms__Provider: "http",
    Authentication__Sms__HttpUrl: sms.url,
    Authentication__Sms__HttpApiKey: sms.token,
    Authentication__Sms__CodePepper: "p".repeat(40),
    PLINTH_TENANT_SECRET_KEY_ID: "test-key",
    PLINTH_TENANT_SECRET_MASTER_KEY: MASTER_KEY,
  }),
});
const t = app.testDatabase;

/** Each test uses its own client IP so per-IP windows never cross tests. */
const peer = () => `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;

describe("password sign-in", () => {
  test("a tenant user signs in with the tenant code; the token carries tenant and roles", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id, { role: "owner" });
    const tokens = await loginTokens(app, { email: user.email.toUpperCase(), tenant: tenant.code });
    expect(tokens).toMatchObject({ tokenType: "Bearer", expiresIn: 900, passwordChangeRequired: false });
    const me = await app.request("/api/auth/me", bearer(tokens.accessToken));
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({
      user: { id: user.id, email: user.email },
      tenant: { id: tenant.id, code: tenant.code },
      roles: ["owner"],
      platformRoles: [],
    });
  });

  test("unknown account, wrong password, wrong tenant and unknown tenant get the same 401", async () => {
    const tenant = await createTenant(t.database.db);
    const other = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const attempts = [
      { email: "nobody@example.com", tenant: tenant.code },
      { email: user.email, tenant: tenant.code, password: "wrong-password-123" },
      { email: user.email, tenant: other.code },
      { email: user.email, tenant: "no-such-tenant" },
      { email: user.email }, // a tenant user is not platform staff
    ];
    const bodies = new Set<string>();
    for (const attempt of attempts) {
      const response = await login(app, attempt, { peer: peer() });
      expect(response.status).toBe(401);
      const body = (await response.json()) as Record<string, unknown>;
      bodies.add(JSON.stringify({ ...body, requestId: undefined }));
    }
    expect(bodies.size).toBe(1);
  });

  test("an unknown account costs about as long as a wrong password (a real hash is checked)", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    // this process's CPU time (every thread: the hash runs off the main one), not the wall clock,
    // and the two kinds taken in turn: other processes on the machine move neither
    const cost = async (email: string) => {
      const before = process.cpuUsage();
      await login(app, { email, password: "wrong-password-123", tenant: tenant.code }, { peer: peer() });
      const used = process.cpuUsage(before);
      return (used.user + used.system) / 1000;
    };
    await cost("warm@example.com");
    const unknown: number[] = [];
    const wrong: number[] = [];
    for (let i = 0; i < 7; i++) {
      unknown.push(await cost("nobody-here@example.com"));
      wrong.push(await cost(user.email));
    }
    const median = (samples: number[]) => samples.sort((a, b) => a - b)[3] ?? 0;
    expect(median(unknown)).toBeGreaterThan(median(wrong) * 0.5);
    expect(median(unknown)).toBeLessThan(median(wrong) * 2);
  });

  test("the password window: after 5 failures the address is refused, even with the right password", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const ip = peer();
    for (let i = 0; i < 5; i++) {
      expect(
        (
          await login(
            app,
            { email: user.email, tenant: tenant.code, password: `wrong-${i}-xxxxxxx` },
            { peer: ip },
          )
        ).status,
      ).toBe(401);
      clock.advance(5_000); // past the slow-down between attempts
    }
    const locked = await login(app, { email: user.email, tenant: tenant.code }, { peer: ip });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
    // the same refusal for an account that does not exist: nothing is revealed
    const ghostIp = peer();
    for (let i = 0; i < 5; i++) {
      await login(app, { email: "ghost@example.com", tenant: tenant.code }, { peer: ghostIp });
      clock.advance(5_000);
    }
    const ghost = await login(app, { email: "ghost@example.com", tenant: tenant.code }, { peer: ghostIp });
    expect(ghost.status).toBe(429);
    expect(await ghost.json()).toMatchObject({
      ...((await locked.json()) as object),
      requestId: expect.any(String),
      instance: expect.any(String),
    });
    // the window passes
    clock.advance(16 * 60_000);
    expect((await login(app, { email: user.email, tenant: tenant.code }, { peer: ip })).status).toBe(200);
  });

  test("a successful sign-in resets the account's window", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 4; i++)
        await login(
          app,
          { email: user.email, tenant: tenant.code, password: "nope-nope-nope" },
          { peer: peer() },
        );
      expect((await login(app, { email: user.email, tenant: tenant.code }, { peer: peer() })).status).toBe(
        200,
      );
    }
  });

  test("the client IP's window counts failures only: an office behind one address can sign in all day", async () => {
    const strict = await createTestApp({
      database: t.database,
      clock,
      env: { ...settingsEnv(relaxedLimits), Authentication__Password__IpAttemptLimit: "3" },
    });
    const tenant = await createTenant(t.database.db);
    const office = peer();
    for (let i = 0; i < 6; i++) {
      const colleague = await createUser(t.database.db, tenant.id);
      expect(
        (await login(strict, { email: colleague.email, tenant: tenant.code }, { peer: office })).status,
      ).toBe(200);
    }
    const guesses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await login(
        strict,
        { email: `guess${i}@example.com`, tenant: tenant.code },
        { peer: office },
      );
      guesses.push(response.status);
    }
    expect(guesses).toEqual([401, 401, 401, 429]);
  });

  test("bad bodies are 400 problems naming the fields", async () => {
    const response = await app.request("/api/auth/login", json({ email: 5 }));
    expect(response.status).toBe(400);
    const body = (await response.json()) as { code: string; errors: { path: string }[] };
    expect(body.code).toBe("validation_failed");
    expect(body.errors.map((e) => e.path)).toEqual(expect.arrayContaining(["email", "password"]));
  });
});

describe("refresh tokens", () => {
  const refresh = (token: string) => app.request("/api/auth/refresh", json({ refreshToken: token }));

  test("rotate: each refresh token works once and returns a new pair", async () => {
    const first = (await signedInTenant(app)).member;
    const second = await refresh(first.refreshToken);
    expect(second.status).toBe(200);
    const pair = (await second.json()) as Tokens;
    expect(pair.refreshToken).not.toBe(first.refreshToken);
    expect((await app.request("/api/auth/me", bearer(pair.accessToken))).status).toBe(200);
  });

  test("reusing a rotated token revokes the whole session", async () => {
    const first = (await signedInTenant(app)).member;
    const second = (await (await refresh(first.refreshToken)).json()) as Tokens;
    expect((await refresh(first.refreshToken)).status).toBe(401); // replay of the spent token
    expect((await refresh(second.refreshToken)).status).toBe(401); // the thief's and the owner's both die
    expect((await app.request("/api/auth/me", bearer(second.accessToken))).status).toBe(401);
  });

  test("logout ends the session at once; logout is idempotent", async () => {
    const tokens = (await signedInTenant(app)).member;
    expect((await app.request("/api/auth/logout", json({ refreshToken: tokens.refreshToken }))).status).toBe(
      204,
    );
    expect((await app.request("/api/auth/me", bearer(tokens.accessToken))).status).toBe(401);
    expect((await refresh(tokens.refreshToken)).status).toBe(401);
    expect((await app.request("/api/auth/logout", json({ refreshToken: tokens.refreshToken }))).status).toBe(
      204,
    );
    expect((await app.request("/api/auth/logout", json({ refreshToken: "unknown" }))).status).toBe(204);
  });

  test("an expired refresh token is refused", async () => {
    const tokens = (await signedInTenant(app)).member;
    clock.advance(31 * 86_400_000);
    expect((await refresh(tokens.refreshToken)).status).toBe(401);
  });
});

describe("the bootstrapped administrator must change the password first", () => {
  test("first login says so; nothing but the password change works until it is done", async () => {
    const db = await createTestDatabase();
    try {
      const local = await createTestApp({
        database: db.database,
        clock,
        env: settingsEnv(relaxedLimits),
      });
      const admin = await createPlatformAdmin(db.database.db);
      const first = await loginTokens(local, { email: admin.email });
      expect(first.passwordChangeRequired).toBe(true);
      for (const [path, init] of [
        ["/api/auth/me", bearer(first.accessToken)],
        ["/api/admin/tenants", bearer(first.accessToken)],
        ["/api/tenant/users", bearer(first.accessToken)],
      ] as const) {
        const response = await local.request(path, init);
        expect(response.status).toBe(403);
        expect(((await response.json()) as { code: string }).code).toBe("password_change_required");
      }
      const change = (body: Record<string, string>) =>
        local.request("/api/auth/password", json(body, { authorization: `Bearer ${first.accessToken}` }));
      expect(
        (await change({ currentPassword: "not-the-password", newPassword: "brand-new-password-1" })).status,
      ).toBe(401);
      expect((await change({ currentPassword: PASSWORD, newPassword: "short" })).status).toBe(400);
      // long enough but guessable: 400 naming the field, the password never echoed
      const guessable = await change({ currentPassword: PASSWORD, newPassword: "password1234" });
      expect(guessable.status).toBe(400);
      const problem = (await guessable.json()) as { errors: { path: string; message: string }[] };
      expect(problem.errors).toEqual([
        { path: "newPassword", message: expect.stringContaining("too easy to guess") },
      ]);
      expect(JSON.stringify(problem)).not.toContain("password1234");
      expect((await change({ currentPassword: PASSWORD, newPassword: PASSWORD })).status).toBe(400);
      const changed = await change({ currentPassword: PASSWORD, newPassword: "brand-new-password-1" });
      expect(changed.status).toBe(200);
      const fresh = (await changed.json()) as Tokens;
      expect(fresh.passwordChangeRequired).toBe(false);
      expect((await local.request("/api/auth/me", bearer(fresh.accessToken))).status).toBe(200);
      expect((await local.request("/api/admin/tenants", bearer(fresh.accessToken))).status).toBe(200);
      // the old temporary password no longer works; the new one does, without the flag
      expect((await login(local, { email: admin.email }, { peer: peer() })).status).toBe(401);
      const again = await loginTokens(local, { email: admin.email, password: "brand-new-password-1" });
      expect(again.passwordChangeRequired).toBe(false);
    } finally {
      await db.drop();
    }
  });
});

describe("SMS codes", () => {
  async function phoneUser() {
    const tenant = await createTenant(t.database.db);
    const phone = `+1415555${String(Math.floor(Math.random() * 10_000)).padStart(4, "0")}`;
    await createUser(t.database.db, tenant.id, { phone });
    return { tenant, phone };
  }
  /** Sends, then waits for the background delivery the answer does not wait for. */
  const send = async (phone: string, tenant: string, ip = peer()) => {
    const response = await app.request("/api/auth/sms/send", json({ phone, tenant }), ip);
    await app.deps.pending.settled();
    return response;
  };
  const verify = (phone: string, code: string, tenant: string, ip = peer()) =>
    app.request("/api/auth/sms/verify", json({ phone, code, tenant }), ip);

  test("without a tenant, platform staff sign in with a code on the named platform path (the API as its role)", async () => {
    const staff = await readyPlatformUser(t.database.db, { role: "platform_viewer" });
    const phone = `+1415556${String(Math.floor(Math.random() * 10_000)).padStart(4, "0")}`;
    await t.database.db.update(users).set({ phone }).where(eq(users.id, staff.id));
    const response = await app.request("/api/auth/sms/send", json({ phone }), peer());
    await app.deps.pending.settled();
    expect(response.status).toBe(202);
    const code = sms.lastCode(phone);
    expect(code).toMatch(/^\d{6}$/);
    const { execute, sql } = await import("../../src/db/client.ts");
    const stored = await execute<{ tenant_id: string | null }>(
      t.database.db,
      sql`select tenant_id from sms_codes where phone = ${phone}`,
    );
    expect(stored).toEqual([{ tenant_id: null }]);
    const ok = await app.request("/api/auth/sms/verify", json({ phone, code: code ?? "" }), peer());
    expect(ok.status).toBe(200);
    const me = await app.request("/api/auth/me", bearer(((await ok.json()) as Tokens).accessToken));
    expect(await me.json()).toMatchObject({ user: { id: staff.id }, tenant: null });
    // a wrong code is counted on the same path
    expect((await app.request("/api/auth/sms/verify", json({ phone, code: "000000" }), peer())).status).toBe(
      401,
    );
  });

  test("a code is sent through the provider, signs in once, and is stored only as an HMAC", async () => {
    const { tenant, phone } = await phoneUser();
    expect((await send(phone, tenant.code)).status).toBe(202);
    const code = sms.lastCode(phone);
    expect(code).toMatch(/^\d{6}$/);
    const { execute, sql } = await import("../../src/db/client.ts");
    const rows = await execute<{ code_hash: string }>(
      t.database.db,
      sql`select code_hash from sms_codes where phone = ${phone}`,
    );
    expect(rows[0]?.code_hash).not.toContain(code ?? "x");
    const ok = await verify(phone, code ?? "", tenant.code);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as Tokens).accessToken).toBeTruthy();
    expect((await verify(phone, code ?? "", tenant.code)).status).toBe(401); // single use
  });

  test("the answer does not wait for the lookup or the provider: a known number answers like an unknown one", async () => {
    const { tenant, phone } = await phoneUser();
    let release = () => {};
    sms.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    try {
      // the provider is stuck: were the send awaited, this request would not answer
      const response = await app.request("/api/auth/sms/send", json({ phone, tenant: tenant.code }), peer());
      expect(response.status).toBe(202);
      expect(app.deps.pending.size).toBeGreaterThan(0);
      expect(sms.lastCode(phone)).toBeUndefined();
    } finally {
      sms.hold = null;
      release();
    }
    expect(await app.deps.pending.settled(10_000)).toBe(true);
    expect(sms.lastCode(phone)).toMatch(/^\d{6}$/);
  });

  test("an unknown number gets the same 202 and nothing is sent", async () => {
    const tenant = await createTenant(t.database.db);
    const before = sms.messages.length;
    expect((await send("+14155550000", tenant.code)).status).toBe(202);
    expect((await send("+14155550001", "no-such-tenant")).status).toBe(202);
    expect(sms.messages.length).toBe(before);
  });

  test("codes expire", async () => {
    const { tenant, phone } = await phoneUser();
    await send(phone, tenant.code);
    const code = sms.lastCode(phone) ?? "";
    clock.advance(301_000);
    expect((await verify(phone, code, tenant.code)).status).toBe(401);
  });

  test("wrong codes burn the code after the verify limit; the verify window then refuses", async () => {
    const { tenant, phone } = await phoneUser();
    await send(phone, tenant.code);
    const code = sms.lastCode(phone) ?? "";
    const wrong = code === "000000" ? "111111" : "000000";
    for (let i = 0; i < 4; i++) expect((await verify(phone, wrong, tenant.code)).status).toBe(401);
    expect((await verify(phone, wrong, tenant.code)).status).toBe(401); // 5th wrong: the code is burnt
    expect((await verify(phone, code, tenant.code)).status).toBe(429); // window full
    clock.advance(16 * 60_000);
    expect((await verify(phone, code, tenant.code)).status).toBe(401); // window passed, but the code is gone
  });

  test("the send window: the fourth code within the window is 429", async () => {
    const { tenant, phone } = await phoneUser();
    for (let i = 0; i < 3; i++) expect((await send(phone, tenant.code)).status).toBe(202);
    const refused = await send(phone, tenant.code);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBeTruthy();
  });

  test("a provider failure still answers 202 and is logged without the code", async () => {
    const { tenant, phone } = await phoneUser();
    sms.failNext = 1;
    expect((await send(phone, tenant.code)).status).toBe(202);
    expect(app.logs.some((l) => l.includes("SMS delivery failed"))).toBe(true);
    expect(app.logs.join("\n")).not.toMatch(/sign-in code is \d{6}/);
  });

  test("a malformed number is a 400 naming the field", async () => {
    const tenant = await createTenant(t.database.db);
    const response = await send("0415 555", tenant.code);
    expect(response.status).toBe(400);
  });

  test("the tenant's own SMS provider is used; a Disabled one means none, never the global default", async () => {
    const own = startSmsGateway();
    try {
      const { keyring } = parseTenantSecretKeys({
        KeyId: "test-key",
        MasterKey: MASTER_KEY,
        PreviousKeys: [],
      });
      if (!keyring) throw new Error("keyring");
      const withOwn = await phoneUser();
      const now = clock.now();
      await writeTenantSecret(t.database.db, keyring, withOwn.tenant.id, {
        name: "sms-api-key",
        value: own.token,
        now,
      });
      await putTenantProvider({ database: t.database, clock }, systemCtx("test", withOwn.tenant.id), {
        type: "sms",
        provider: "http",
        status: "Active",
        settings: { url: own.url },
        secretRefs: { apiKey: "sms-api-key" },
      });
      const globalBefore = sms.messages.length;
      expect((await send(withOwn.phone, withOwn.tenant.code)).status).toBe(202);
      expect(own.lastCode(withOwn.phone)).toMatch(/^\d{6}$/);
      expect(sms.messages.length).toBe(globalBefore);

      const disabled = await phoneUser();
      await putTenantProvider({ database: t.database, clock }, systemCtx("test", disabled.tenant.id), {
        type: "sms",
        provider: "http",
        status: "Disabled",
        settings: { url: own.url },
        secretRefs: {},
      });
      const ownBefore = own.messages.length;
      expect((await send(disabled.phone, disabled.tenant.code)).status).toBe(202);
      expect(own.messages.length).toBe(ownBefore);
      expect(sms.messages.length).toBe(globalBefore);

      const noRow = await phoneUser();
      await send(noRow.phone, noRow.tenant.code);
      expect(sms.lastCode(noRow.phone)).toMatch(/^\d{6}$/); // the global default
    } finally {
      await own.stop();
    }
  });
});
