import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { bearer, json, login, newMasterKey, signedInTenant } from "../helpers/identity.ts";
import { enrolTotp, rfcCode } from "../helpers/mfa.ts";

/** Issue #33 point 8: an audit row and a webhook event for every enrolment, backup-code use, removal and reset. */

const clock = new ManualClock(Date.now());
const h = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "mfa-audit-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
});

test("enrolment, a backup code's use, removal and a reset each leave an audit row and a webhook event", async () => {
  const tenant = await signedInTenant(h);
  const member = tenant.member;
  const { secret, backupCodes } = await enrolTotp(h, clock, member);
  const step = (await (await login(h, { email: member.email, tenant: tenant.code })).json()) as {
    mfaToken: string;
  };
  const used = await h.request(
    "/api/auth/mfa/verify",
    json({ mfaToken: step.mfaToken, backupCode: backupCodes[0] }),
  );
  expect(used.status).toBe(200);
  const stepped = await h.request(
    "/api/auth/mfa/step-up",
    json({ code: rfcCode(secret, clock.now().getTime()) }, member.headers),
  );
  expect(stepped.status).toBe(200);
  const fresh = ((await stepped.json()) as { accessToken: string }).accessToken;
  expect((await h.request("/api/auth/mfa/totp", { method: "DELETE", ...bearer(fresh) })).status).toBe(204);
  await enrolTotp(h, clock, { accessToken: fresh });
  const reset = await h.request(`/api/tenant/users/${member.id}/mfa`, {
    method: "DELETE",
    ...bearer(tenant.admin.accessToken),
  });
  expect(reset.status).toBe(200);

  const expected = ["mfa.enrolled", "mfa.backup_code_used", "mfa.removed", "mfa.enrolled", "mfa.reset"];
  const audited = await execute<{ action: string }>(
    h.db,
    sql`select action from audit_events where tenant_id = ${tenant.id} and target_id = ${member.id}
        and action like 'mfa.%' order by id`,
  );
  expect(audited.map((row) => row.action)).toEqual(expected);
  const emitted = await execute<{ type: string }>(
    h.db,
    sql`select type from webhook_events where tenant_id = ${tenant.id} and data->>'userId' = ${member.id}
        and type like 'mfa.%'`,
  );
  // several share one instant of the test clock: the same events, in any order
  expect(emitted.map((row) => row.type).sort()).toEqual([...expected].sort());
});

test("every sensitive operation asks an old sign-in of a user with a factor for step-up (RFC 9470)", async () => {
  const tenant = await signedInTenant(h);
  await enrolTotp(h, clock, tenant.owner);
  clock.advance(11 * 60_000);
  const calls: [string, string, unknown][] = [
    ["POST", "/api/auth/password", { currentPassword: "x", newPassword: "another-long-password-33" }],
    ["POST", "/api/tenant/api-keys", { name: "CI", scopes: ["users:read"] }],
    ["POST", `/api/tenant/webhooks/${crypto.randomUUID()}/rotate-secret`, undefined],
    ["PUT", "/api/tenant/security-policy", { requireMfa: "everyone" }],
    ["POST", "/api/auth/mfa/backup-codes", undefined],
    ["DELETE", "/api/auth/mfa/totp", undefined],
    ["POST", "/api/auth/passkeys/register/options", undefined],
  ];
  for (const [method, path, body] of calls) {
    const refused = await h.request(path, {
      method,
      headers: { ...tenant.owner.headers, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    expect([path, refused.status]).toEqual([path, 401]);
    expect(refused.headers.get("www-authenticate")).toContain('error="insufficient_user_authentication"');
    expect(((await refused.json()) as { code: string }).code).toBe("step_up_required");
  }
});
