import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { systemClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import type { Db } from "../../src/db/client.ts";
import { tenantDomains, tenants, users } from "../../src/db/schema/index.ts";
import { bootstrapPlatformAdmin } from "../../src/identity/bootstrap.ts";
import { createTenantUser } from "../../src/identity/users.ts";
import type { TestApp } from "./app.ts";

export const PASSWORD = "a-long-test-password-1";

/** Base64 of 32 random bytes: a valid tenant-secret master key. */
export function newMasterKey(): string {
  return randomBytes(32).toString("base64");
}

/** The one tenant factory: a fresh tenant with a unique code. */
export async function createTenant(db: Db, code = `t${crypto.randomUUID().slice(0, 8)}`) {
  const [tenant] = await db
    .insert(tenants)
    .values({ code, name: `Tenant ${code}` })
    .returning();
  if (!tenant) throw new Error("no tenant");
  return tenant;
}

export async function createUser(
  db: Db,
  tenantId: string,
  input: { email?: string; role?: "owner" | "admin" | "member"; phone?: string; password?: string } = {},
) {
  const email = input.email ?? `u${crypto.randomUUID().slice(0, 8)}@example.com`;
  const { id } = await createTenantUser(
    { database: { db }, clock: systemClock },
    systemCtx("identity", tenantId),
    {
      email,
      name: "Test User",
      password: input.password ?? PASSWORD,
      role: input.role ?? "member",
      phone: input.phone,
    },
  );
  // a factory user has already replaced the password it was given (createTenantUser flags it)
  await db.update(users).set({ mustChangePassword: false }).where(eq(users.id, id));
  return { id, email };
}

export async function createPlatformAdmin(
  db: Db,
  email = `admin${crypto.randomUUID().slice(0, 6)}@example.com`,
) {
  const { userId } = await bootstrapPlatformAdmin({ database: { db } }, systemCtx("bootstrap"), {
    email,
    password: PASSWORD,
    name: "Admin",
  });
  return { id: userId, email };
}

export async function activeDomain(db: Db, tenantId: string, hostname: string) {
  await db.insert(tenantDomains).values({ tenantId, hostname, status: "Active", verificationToken: "t" });
  return hostname;
}

export async function setDomainStatus(db: Db, hostname: string, status: "Pending" | "Failed" | "Active") {
  await db.update(tenantDomains).set({ status }).where(eq(tenantDomains.hostname, hostname));
}

export interface Tokens {
  accessToken: string;
  refreshToken: string;
  passwordChangeRequired: boolean;
}

export async function login(
  t: TestApp,
  body: { email: string; password?: string; tenant?: string },
  init: { host?: string; peer?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (init.host) headers.host = init.host;
  return t.request(
    init.host ? `http://${init.host}/api/auth/login` : "/api/auth/login",
    { method: "POST", headers, body: JSON.stringify({ password: PASSWORD, ...body }) },
    init.peer,
  );
}

export async function loginTokens(
  t: TestApp,
  body: { email: string; password?: string; tenant?: string },
): Promise<Tokens> {
  const response = await login(t, body);
  if (response.status !== 200) throw new Error(`login failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as Tokens;
}

/**
 * Signs in through the app's real login route and returns the Authorization header to use, for
 * tests that build the app themselves (`request` sends one request to it).
 */
export async function signInHeaders(
  request: (path: string, init: RequestInit) => Response | Promise<Response>,
  body: { email: string; tenant?: string },
): Promise<Record<string, string>> {
  const response = await request("/api/auth/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, password: PASSWORD }),
  });
  if (response.status !== 200) throw new Error(`sign-in failed: ${response.status} ${await response.text()}`);
  const { accessToken } = (await response.json()) as { accessToken: string };
  return { authorization: `Bearer ${accessToken}` };
}

export function bearer(token: string, extra: Record<string, string> = {}): RequestInit {
  return { headers: { authorization: `Bearer ${token}`, ...extra } };
}

export const json = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});
