import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import { Secret, URI } from "otpauth";
import { enrolmentDue } from "../../src/auth/security-policy.ts";
import { totpStepOf } from "../../src/auth/totp.ts";
import { loadIdentity } from "../../src/auth/user-identity.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import {
  bearer,
  json,
  login,
  newMasterKey,
  PASSWORD,
  readyPlatformUser,
  type SignedInUser,
  signedInTenant,
} from "../helpers/identity.ts";
import { enrolTotp, rfcCode } from "../helpers/mfa.ts";

/** TOTP, backup codes, the sign-in step, step-up (issue #33; docs/auth.md "Second factors"). */

const ORIGIN = "https://app.customer.test";
const clock = new ManualClock(Date.now());
const h = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "mfa-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
  env: { BrowserAuth__AllowedOrigins__0: ORIGIN },
});

const nextStep = () => clock.advance(30_000);

const enrol = (user: SignedInUser) => enrolTotp(h, clock, user);

type Step = { mfaRequired: true; mfaToken: string; methods: string[] };

async function passwordStep(email: string, tenant: string): Promise<Step> {
  const response = await login(h, { email, tenant });
  expect(response.status).toBe(200);
  expect(response.headers.get("set-cookie")).toBeNull();
  const body = (await response.json()) as Step & { accessToken?: string };
  expect(body.accessToken).toBeUndefined();
  expect(body.mfaRequired).toBe(true);
  return body;
}

const verify = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  h.request("/api/auth/mfa/verify", json(body, headers));

test("RFC 6238 appendix B vectors: the verifier accepts each at its time (8 digits) and its 6-digit form", () => {
  const seeds = {
    SHA1: "12345678901234567890",
    SHA256: "12345678901234567890123456789012",
    SHA512: "1234567890123456789012345678901234567890123456789012345678901234",
  } as const;
  const vectors: [number, string, keyof typeof seeds][] = [
    [59, "94287082", "SHA1"],
    [59, "46119246", "SHA256"],
    [59, "90693936", "SHA512"],
    [1111111109, "07081804", "SHA1"],
    [1111111109, "68084774", "SHA256"],
    [1111111109, "25091201", "SHA512"],
    [1111111111, "14050471", "SHA1"],
    [1234567890, "89005924", "SHA1"],
    [1234567890, "91819424", "SHA256"],
    [2000000000, "69279037", "SHA1"],
    [20000000000, "65353130", "SHA1"],
    [20000000000, "77737706", "SHA256"],
    [20000000000, "47863826", "SHA512"],
    [1234567890, "93441116", "SHA512"],
    [2000000000, "90698825", "SHA256"],
    [2000000000, "38618901", "SHA512"],
    [1111111111, "67062674", "SHA256"],
    [1111111111, "99943326", "SHA512"],
  ];
  for (const [seconds, code, algorithm] of vectors) {
    const secret = Secret.fromLatin1(seeds[algorithm]);
    const step = Math.floor(seconds / 30);
    const at = seconds * 1000;
    expect(totpStepOf("", code, at, { digits: 8, algorithm, secret })).toBe(step);
    expect(totpStepOf("", code.slice(2), at, { digits: 6, algorithm, secret })).toBe(step);
    // ±1 step of drift, not two
    expect(totpStepOf("", code.slice(2), at + 30_000, { algorithm, secret })).toBe(step);
    expect(totpStepOf("", code.slice(2), at + 61_000, { algorithm, secret })).toBeNull();
  }
  // and the independent generator agrees with the vectors
  expect(rfcCode(Buffer.from(seeds.SHA1), 59_000, 8)).toBe("94287082");
});

test("enrol, then sign in: the step (no tokens, no cookie), an independent authenticator's code completes it with amr and auth_time", async () => {
  const tenant = await signedInTenant(h);
  const { secret, backupCodes } = await enrol(tenant.member);
  expect(backupCodes).toHaveLength(10);
  expect(new Set(backupCodes).size).toBe(10);

  const step = await passwordStep(tenant.member.email, tenant.code);
  expect(step.methods).toEqual(["totp", "backup_code"]);
  const done = await verify({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) });
  expect(done.status).toBe(200);
  const pair = (await done.json()) as { accessToken: string; refreshToken: string };
  const claims = decodeJwt(pair.accessToken);
  expect(claims.amr).toEqual(["pwd", "otp", "mfa"]);
  expect(claims.auth_time).toBe(Math.floor(clock.now().getTime() / 1000));
  expect(claims.acr).toBe("http://schemas.openid.net/pape/policies/2007/06/multi-factor");
  // a refresh keeps them
  const refreshed = await h.request("/api/auth/refresh", json({ refreshToken: pair.refreshToken }));
  expect(decodeJwt(((await refreshed.json()) as { accessToken: string }).accessToken).amr).toEqual([
    "pwd",
    "otp",
    "mfa",
  ]);
  // a user without a factor still gets tokens at once, amr pwd only
  const plain = await login(h, { email: tenant.admin.email, tenant: tenant.code });
  expect(decodeJwt(((await plain.json()) as { accessToken: string }).accessToken).amr).toEqual(["pwd"]);
});

test("a code is used once: the same code replayed (even within its window) is refused; a wrong code leaves the step usable", async () => {
  const tenant = await signedInTenant(h);
  const { secret } = await enrol(tenant.owner);
  const code = rfcCode(secret, clock.now().getTime());
  const first = await passwordStep(tenant.owner.email, tenant.code);
  expect((await verify({ mfaToken: first.mfaToken, code })).status).toBe(200);
  const second = await passwordStep(tenant.owner.email, tenant.code);
  expect((await verify({ mfaToken: second.mfaToken, code })).status).toBe(401);
  // an older code (the step before) is spent too, the next step's works
  expect(
    (await verify({ mfaToken: second.mfaToken, code: rfcCode(secret, clock.now().getTime() - 30_000) }))
      .status,
  ).toBe(401);
  expect(
    (await verify({ mfaToken: second.mfaToken, code: rfcCode(secret, clock.now().getTime() + 30_000) }))
      .status,
  ).toBe(200);
});

test("a stolen step token cannot be used twice, nor after its lifetime, nor on another tenant", async () => {
  const tenant = await signedInTenant(h);
  const other = await signedInTenant(h);
  const { secret } = await enrol(tenant.admin);
  const step = await passwordStep(tenant.admin.email, tenant.code);
  const elsewhere = await verify(
    { mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) },
    { "x-tenant": other.code },
  );
  expect(elsewhere.status).toBe(401);
  expect(
    (await verify({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) })).status,
  ).toBe(200);
  nextStep();
  expect(
    (await verify({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) })).status,
  ).toBe(401);

  const late = await passwordStep(tenant.admin.email, tenant.code);
  clock.advance(301_000);
  expect(
    (await verify({ mfaToken: late.mfaToken, code: rfcCode(secret, clock.now().getTime()) })).status,
  ).toBe(401);
});

test("backup codes: each works once, its use is audited, e-mailed and emitted", async () => {
  const tenant = await signedInTenant(h);
  const { backupCodes } = await enrol(tenant.member);
  const [code] = backupCodes;
  const step = await passwordStep(tenant.member.email, tenant.code);
  const used = await verify({ mfaToken: step.mfaToken, backupCode: code?.toUpperCase() });
  expect(used.status).toBe(200);
  const again = await passwordStep(tenant.member.email, tenant.code);
  expect((await verify({ mfaToken: again.mfaToken, backupCode: code })).status).toBe(401);
  const audited = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from audit_events where action = 'mfa.backup_code_used' and target_id = ${tenant.member.id}`,
  );
  expect(audited[0]?.n).toBe(1);
  const mailed = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from email_messages where template = 'mfa-backup-code-used' and recipient = ${tenant.member.email}`,
  );
  expect(mailed[0]?.n).toBe(1);
  const status = await h.request("/api/auth/mfa", bearer(tenant.member.accessToken));
  expect(await status.json()).toEqual({
    methods: ["totp", "backup_code"],
    totp: "enrolled",
    backupCodesLeft: 9,
  });
});

test("step-up: an old sign-in gets RFC 9470's challenge on removing the factor; a fresh code lets it through", async () => {
  const tenant = await signedInTenant(h);
  const { secret } = await enrol(tenant.owner);
  const step = await passwordStep(tenant.owner.email, tenant.code);
  const done = await verify({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) });
  const { accessToken } = (await done.json()) as { accessToken: string };
  clock.advance(11 * 60_000);
  const refused = await h.request("/api/auth/mfa/totp", { method: "DELETE", ...bearer(accessToken) });
  expect(refused.status).toBe(401);
  const challenge = refused.headers.get("www-authenticate") ?? "";
  expect(challenge).toContain('error="insufficient_user_authentication"');
  expect(challenge).toContain("max_age=600");
  expect(challenge).toContain('acr_values="http://schemas.openid.net/pape/policies/2007/06/multi-factor"');
  expect(((await refused.json()) as { code: string }).code).toBe("step_up_required");
  // so is a new set of backup codes and a password change
  expect(
    (await h.request("/api/auth/mfa/backup-codes", { method: "POST", ...bearer(accessToken) })).status,
  ).toBe(401);

  const wrong = await h.request(
    "/api/auth/mfa/step-up",
    json({ code: "000000" }, { authorization: `Bearer ${accessToken}` }),
  );
  expect(wrong.status).toBe(401);
  const stepped = await h.request(
    "/api/auth/mfa/step-up",
    json({ code: rfcCode(secret, clock.now().getTime()) }, { authorization: `Bearer ${accessToken}` }),
  );
  expect(stepped.status).toBe(200);
  const fresh = ((await stepped.json()) as { accessToken: string }).accessToken;
  expect(decodeJwt(fresh).auth_time).toBe(Math.floor(clock.now().getTime() / 1000));
  const regenerated = await h.request("/api/auth/mfa/backup-codes", { method: "POST", ...bearer(fresh) });
  expect(regenerated.status).toBe(200);
  expect(((await regenerated.json()) as { backupCodes: string[] }).backupCodes).toHaveLength(10);
  expect((await h.request("/api/auth/mfa/totp", { method: "DELETE", ...bearer(fresh) })).status).toBe(204);
  // no factor left: the next sign-in gets tokens at once
  const plain = await login(h, { email: tenant.owner.email, tenant: tenant.code });
  expect(((await plain.json()) as { accessToken?: string }).accessToken).toBeString();
});

const HOUR_MS = 3_600_000;
const newBackupCodes = (accessToken: string) =>
  h.request("/api/auth/mfa/backup-codes", { method: "POST", ...bearer(accessToken) });
const stepUp = (accessToken: string, body: Record<string, unknown>) =>
  h.request("/api/auth/mfa/step-up", json(body, { authorization: `Bearer ${accessToken}` }));
/** A fresh access token of the session (`auth_time` the session row's): one issued ahead is not valid yet. */
const refreshed = async (refreshToken: string) => {
  const response = await h.request("/api/auth/refresh", json({ refreshToken }));
  expect(response.status).toBe(200);
  return (await response.json()) as { accessToken: string; refreshToken: string };
};
const codeOf = async (response: Response) => ((await response.json()) as { code?: string }).code;

test("a sign-in with a second factor made while the clock read an hour ahead is not recent once the clock is put back", async () => {
  const tenant = await signedInTenant(h);
  const { secret } = await enrol(tenant.owner);
  clock.advance(HOUR_MS);
  const step = await passwordStep(tenant.owner.email, tenant.code);
  const done = await verify({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) });
  expect(done.status).toBe(200);
  const signedInAt = Math.floor(clock.now().getTime() / 1000);
  const { refreshToken } = (await done.json()) as { refreshToken: string };
  clock.advance(-HOUR_MS);
  const { accessToken } = await refreshed(refreshToken);
  expect(decodeJwt(accessToken).auth_time).toBe(signedInAt);
  // auth_time lies an hour in the future: not recent for 10 minutes plus the hour
  const refused = await newBackupCodes(accessToken);
  expect(refused.status).toBe(401);
  expect(await codeOf(refused)).toBe("step_up_required");
  clock.advance(HOUR_MS);
});

test("a step-up made while the clock read an hour ahead is not recent once the clock is put back; 30 s back still is", async () => {
  const tenant = await signedInTenant(h);
  const { secret, backupCodes } = await enrol(tenant.owner);
  const step = await passwordStep(tenant.owner.email, tenant.code);
  const done = await verify({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) });
  const signedIn = (await done.json()) as { refreshToken: string };
  clock.advance(11 * 60_000 + HOUR_MS);
  const { accessToken, refreshToken } = await refreshed(signedIn.refreshToken);
  const ahead = await stepUp(accessToken, { code: rfcCode(secret, clock.now().getTime()) });
  expect(ahead.status).toBe(200);
  clock.advance(-HOUR_MS);
  const afterStep = (await refreshed(refreshToken)).accessToken;
  const refused = await newBackupCodes(afterStep);
  expect(refused.status).toBe(401);
  expect(await codeOf(refused)).toBe("step_up_required");
  // the caller steps up again (a backup code: TOTP's replay guard still holds the step used ahead)
  const again = await stepUp(afterStep, { backupCode: backupCodes[0] });
  expect(again.status).toBe(200);
  const stepped = ((await again.json()) as { accessToken: string }).accessToken;
  // a clock put back 30 s (hosts a little apart) keeps the step-up recent
  clock.advance(-30_000);
  expect((await newBackupCodes(stepped)).status).toBe(200);
  clock.advance(HOUR_MS);
});

test("a browser sign-in's step sets no cookie; completing it from an allowed origin sets the session cookie", async () => {
  const tenant = await signedInTenant(h);
  const { secret } = await enrol(tenant.member);
  const started = await h.request(
    "/api/auth/browser/login",
    json({ email: tenant.member.email, password: PASSWORD, tenant: tenant.code }, { origin: ORIGIN }),
  );
  expect(started.status).toBe(200);
  expect(started.headers.get("set-cookie")).toBeNull();
  const step = (await started.json()) as Step;
  const code = rfcCode(secret, clock.now().getTime());
  expect((await verify({ mfaToken: step.mfaToken, code }, { origin: "https://evil.test" })).status).toBe(403);
  const done = await verify({ mfaToken: step.mfaToken, code }, { origin: ORIGIN });
  expect(done.status).toBe(200);
  expect(done.headers.get("set-cookie")).toContain("__Host-plinth_session=");
  expect(((await done.json()) as { csrfToken: string }).csrfToken).toBeString();
});

test("no secret or code in a log line, an answer after enrolment, or the database in clear (pg_dump)", async () => {
  const tenant = await signedInTenant(h);
  const { uri, backupCodes, secret } = await enrol(tenant.member);
  const base32 = new URL(uri).searchParams.get("secret") ?? "";
  expect(base32.length).toBeGreaterThanOrEqual(32);
  const step = await passwordStep(tenant.member.email, tenant.code);
  await verify({ mfaToken: step.mfaToken, code: "123456" });
  await verify({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()) });
  const status = await (await h.request("/api/auth/mfa", bearer(tenant.member.accessToken))).text();
  const dump = Bun.spawnSync(["pg_dump", "--data-only", h.testDatabase.directUrl]);
  expect(dump.exitCode).toBe(0);
  const dumped = dump.stdout.toString();
  expect(dumped).toContain(tenant.member.id);
  for (const text of [h.logs.join("\n"), status, dumped]) {
    expect(text).not.toContain(base32);
    expect(text).not.toContain(step.mfaToken);
    for (const code of backupCodes) expect(text.toLowerCase()).not.toContain(code.toLowerCase());
  }
});

test("an impersonated session cannot enrol or remove a factor", async () => {
  const tenant = await signedInTenant(h);
  const { signedInPlatformAdmin } = await import("../helpers/identity.ts");
  const admin = await signedInPlatformAdmin(h);
  const opened = await h.request(
    "/api/admin/impersonations",
    json(
      { userId: tenant.member.id, tenant: tenant.code, reason: "ticket 1: checking factors", minutes: 5 },
      { authorization: `Bearer ${admin.accessToken}` },
    ),
  );
  const { accessToken } = (await opened.json()) as { accessToken: string };
  expect((await h.request("/api/auth/mfa/totp", { method: "POST", ...bearer(accessToken) })).status).toBe(
    403,
  );
  expect((await h.request("/api/auth/mfa/totp", { method: "DELETE", ...bearer(accessToken) })).status).toBe(
    403,
  );
});

test("requireMfa=everyone: a member without a factor gets the step, then the enrolment path, which signs them in", async () => {
  const tenant = await signedInTenant(h);
  const put = (body: unknown, user: SignedInUser) =>
    h.request("/api/tenant/security-policy", { ...json(body, user.headers), method: "PUT" });
  expect((await put({ requireMfa: "everyone" }, tenant.member)).status).toBe(403);
  const changed = await put({ requireMfa: "everyone", enrolmentGraceDays: 0 }, tenant.owner);
  expect(changed.status).toBe(200);
  expect(await changed.json()).toMatchObject({ requireMfa: "everyone", enrolmentGraceDays: 0 });

  const step = await passwordStep(tenant.member.email, tenant.code);
  expect(step.methods).toEqual([]);
  expect((step as Step & { enrolmentRequired?: boolean }).enrolmentRequired).toBe(true);
  expect((await verify({ mfaToken: step.mfaToken, code: "123456" })).status).toBe(401);
  const enrolment = await h.request("/api/auth/mfa/enrolment", json({ mfaToken: step.mfaToken }));
  expect(enrolment.status).toBe(200);
  const app = URI.parse(((await enrolment.json()) as { uri: string }).uri);
  const done = await verify({
    mfaToken: step.mfaToken,
    code: app.generate({ timestamp: clock.now().getTime() }),
  });
  expect(done.status).toBe(200);
  const signedIn = (await done.json()) as { accessToken: string; backupCodes: string[] };
  expect(decodeJwt(signedIn.accessToken).amr).toEqual(["pwd", "otp", "mfa"]);
  expect(signedIn.backupCodes).toHaveLength(10);
  nextStep();
  expect((await passwordStep(tenant.member.email, tenant.code)).methods).toEqual(["totp", "backup_code"]);
});

test("requireMfa=admins with a grace period: members are not held; an admin signs in until the grace ends, then must enrol", async () => {
  const tenant = await signedInTenant(h);
  const changed = await h.request("/api/tenant/security-policy", {
    ...json({ requireMfa: "admins", enrolmentGraceDays: 3 }, tenant.owner.headers),
    method: "PUT",
  });
  expect(changed.status).toBe(200);
  const shown = await h.request("/api/tenant/security-policy", tenant.admin);
  expect(await shown.json()).toMatchObject({ requireMfa: "admins", enrolmentGraceDays: 3 });
  const tokens = async (email: string) =>
    ((await (await login(h, { email, tenant: tenant.code })).json()) as { accessToken?: string }).accessToken;
  expect(await tokens(tenant.admin.email)).toBeString();
  clock.advance(4 * 86_400_000);
  expect(await tokens(tenant.member.email)).toBeString();
  const step = await passwordStep(tenant.admin.email, tenant.code);
  expect((step as Step & { enrolmentRequired?: boolean }).enrolmentRequired).toBe(true);
});

test("platform staff without a factor must enrol in Production after their grace, not elsewhere", async () => {
  const staff = await readyPlatformUser(h.db);
  const identity = await loadIdentity(h.db, staff.id, null);
  if (!identity) throw new Error("no identity");
  const production = { ...h.deps, config: { ...h.deps.config, environment: "Production" as const } };
  // a new staff account has StaffGraceDays (7) to enrol, then every sign-in asks it to
  expect(await enrolmentDue(production, systemCtx("test"), identity)).toBe(false);
  clock.advance(8 * 86_400_000);
  expect(await enrolmentDue(production, systemCtx("test"), identity)).toBe(true);
  expect(await enrolmentDue(h.deps, systemCtx("test"), identity)).toBe(false);
});

test("recovery: an admin resets a member's factors (audited, mailed); an owner's only a platform admin", async () => {
  const tenant = await signedInTenant(h);
  await enrol(tenant.member);
  await enrol(tenant.owner);
  const reset = (path: string, user: SignedInUser) =>
    h.request(path, { method: "DELETE", ...bearer(user.accessToken) });
  expect((await reset(`/api/tenant/users/${tenant.owner.id}/mfa`, tenant.admin)).status).toBe(403);
  expect((await reset(`/api/tenant/users/${tenant.admin.id}/mfa`, tenant.admin)).status).toBe(403);
  const done = await reset(`/api/tenant/users/${tenant.member.id}/mfa`, tenant.admin);
  expect(done.status).toBe(200);
  expect(await done.json()).toEqual({ removed: ["totp", "backup_code"] });
  const plain = await login(h, { email: tenant.member.email, tenant: tenant.code });
  expect(((await plain.json()) as { accessToken?: string }).accessToken).toBeString();
  const rows = await execute<{ n: number }>(
    h.db,
    sql`select (select count(*)::int from audit_events where action = 'mfa.reset' and target_id = ${tenant.member.id})
      + (select count(*)::int from email_messages where template = 'mfa-reset' and recipient = ${tenant.member.email}) as n`,
  );
  expect(rows[0]?.n).toBe(2);
  const { signedInPlatformAdmin } = await import("../helpers/identity.ts");
  const admin = await signedInPlatformAdmin(h);
  const owner = await reset(`/api/admin/tenants/${tenant.id}/users/${tenant.owner.id}/mfa`, admin);
  expect(owner.status).toBe(200);
});
