import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createTenant, createUser, PASSWORD } from "../helpers/identity.ts";

const origin = "https://app.customer.test";
const app = useTestApp({
  settings: relaxedLimits,
  env: {
    AllowedHosts__0: "api.plinth.test",
    AllowedHosts__1: "localhost",
    Tenancy__Resolution__PlatformHost: "api.plinth.test",
    BrowserAuth__AllowedOrigins__0: origin,
  },
});
const on = (path: string) => `http://api.plinth.test${path}`;

test("a browser sign-in and sign-out: one row each, kind browser, the user as actor", async () => {
  const tenant = await createTenant(app.db);
  const user = await createUser(app.db, tenant.id, { role: "owner" });
  const signIn = await app.request(on("/api/auth/browser/login"), {
    method: "POST",
    headers: { "content-type": "application/json", origin, "user-agent": "browser-audit" },
    body: JSON.stringify({ email: user.email, password: PASSWORD, tenant: tenant.code }),
  });
  expect(signIn.status).toBe(200);
  const { csrfToken } = (await signIn.json()) as { csrfToken: string };
  const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  const out = await app.request(on("/api/auth/browser/logout"), {
    method: "POST",
    headers: { cookie, origin, "x-csrf-token": csrfToken },
  });
  expect(out.status).toBe(204);
  const rows = await execute<{
    action: string;
    actor_id: string;
    target_type: string;
    user_agent: string | null;
    details: object;
  }>(
    app.db,
    sql`select action, actor_id, target_type, user_agent, details from audit_events
        where tenant_id = ${tenant.id} and action like 'auth.%' order by audit_events.id`,
  );
  expect(rows).toEqual([
    {
      action: "auth.sign_in",
      actor_id: user.id,
      target_type: "session",
      user_agent: "browser-audit",
      details: { method: "password", kind: "browser" },
    },
    {
      action: "auth.sign_out",
      actor_id: user.id,
      target_type: "session",
      user_agent: null,
      details: { reason: "logout" },
    },
  ]);
  // the cookie and the CSRF token never reach the log
  const all = JSON.stringify(await execute(app.db, sql`select * from audit_events`));
  expect(all).not.toContain(csrfToken);
  expect(all).not.toContain(cookie.split("=")[1] ?? "x");
});
