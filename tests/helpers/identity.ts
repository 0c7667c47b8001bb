import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { applySubscriptionEvent } from "../../src/billing/apply-subscription-event.ts";
import { systemClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import type { Db } from "../../src/db/client.ts";
import {
  tenantDomains,
  tenantMemberships,
  tenantSecrets,
  tenants,
  users,
} from "../../src/db/schema/index.ts";
import type { Deps } from "../../src/deps.ts";
import {
  BootstrapRefusedError,
  bootstrapPlatformAdmin,
  platformAdminExists,
} from "../../src/identity/bootstrap.ts";
import { createPlatformUser } from "../../src/identity/platform-users.ts";
import type { PlatformRole } from "../../src/identity/roles.ts";
import { createTenantUser } from "../../src/identity/users.ts";
import { hashPassword } from "../../src/security/passwords.ts";
import { sealSecret, type TenantSecretKeyring } from "../../src/security/tenant-secrets.ts";
import { createTenant as createTenantOperation } from "../../src/tenancy/tenants.ts";
import type { TestApp } from "./app.ts";
import { silentLogger } from "./cache.ts";
import { ownerDatabaseOf } from "./database.ts";

export const PASSWORD = "a-long-test-password-1";

/** Base64 of 32 random bytes: a valid tenant-secret master key. */
export function newMasterKey(): string {
  return randomBytes(32).toString("base64");
}

/** A tenant secret sealed the way it was before tenant data keys: directly under the master key. */
export async function writeLegacySecret(
  db: Db,
  keys: TenantSecretKeyring,
  tenantId: string,
  name: string,
  value: string,
): Promise<void> {
  await db.insert(tenantSecrets).values({ tenantId, name, ...sealSecret(keys, tenantId, name, value) });
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

/** A shared identity (as an accepted invitation leaves one) with a membership of each tenant given. */
export async function createSharedUser(
  db: Db,
  memberOf: { tenantId: string; role?: "owner" | "admin" | "member" }[],
): Promise<{ id: string; email: string }> {
  const email = `p${crypto.randomUUID().slice(0, 8)}@example.com`;
  const [user] = await db
    .insert(users)
    .values({ pool: "shared", email, name: "Pat", passwordHash: await hashPassword(PASSWORD) })
    .returning({ id: users.id });
  if (!user) throw new Error("no user");
  for (const { tenantId, role = "member" } of memberOf)
    await db.insert(tenantMemberships).values({ tenantId, userId: user.id, role });
  return { id: user.id, email };
}

/**
 * The bootstrapped platform administrator, as the migrator leaves it: the password must be changed
 * at first sign-in. The first of the database only (bootstrap refuses a second); a test that only
 * needs an administrator uses `readyPlatformUser` or `signedInPlatformAdmin`.
 */
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
  t: Pick<TestApp, "request">,
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
  t: Pick<TestApp, "request">,
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

/** A user signed in through the real login route: its tokens and the headers that carry them. */
export interface SignedInUser {
  id: string;
  email: string;
  accessToken: string;
  refreshToken: string;
  /** `{ authorization: "Bearer <accessToken>" }` */
  headers: Record<string, string>;
}

/** Signs `user` in through `t`'s login route (`tenant`: its tenant's code; none for platform staff). */
export async function signIn(
  t: Pick<TestApp, "request">,
  user: { id: string; email: string },
  tenant?: string,
): Promise<SignedInUser> {
  const { accessToken, refreshToken } = await loginTokens(t, { email: user.email, tenant });
  return { ...user, accessToken, refreshToken, headers: { authorization: `Bearer ${accessToken}` } };
}

export interface SignedInTenant {
  id: string;
  code: string;
  name: string;
  owner: SignedInUser;
  admin: SignedInUser;
  member: SignedInUser;
}

/** What `signedInTenant` works through: the harness, or an app a test built over its own deps. */
export interface SignInTarget {
  deps: Deps;
  request: TestApp["request"];
}

/**
 * A fresh tenant (`createTenant`, as a platform administrator's request makes one) with an owner,
 * an admin and a member (`createUser`), created in that order and each signed in through the
 * login route. `plan`: the tenant's subscription activated on that plan first (none: the free
 * plan's defaults, no subscription row).
 */
export async function signedInTenant(
  t: SignInTarget,
  options: { plan?: string } = {},
): Promise<SignedInTenant> {
  const code = `t${crypto.randomUUID().slice(0, 8)}`;
  const tenant = await createTenantOperation(t.deps, systemCtx("test"), { code, name: `Tenant ${code}` });
  if (options.plan)
    await applySubscriptionEvent(t.deps, systemCtx("test", tenant.id), {
      event: "activate",
      source: "admin",
      plan: options.plan,
    });
  // the test's setup writes as the owner, whichever role the app under test connects as
  const db = ownerDatabaseOf(t.deps.database).db;
  const owner = await createUser(db, tenant.id, { role: "owner" });
  const admin = await createUser(db, tenant.id, { role: "admin" });
  const member = await createUser(db, tenant.id, { role: "member" });
  return {
    id: tenant.id,
    code: tenant.code,
    name: tenant.name,
    owner: await signIn(t, owner, tenant.code),
    admin: await signIn(t, admin, tenant.code),
    member: await signIn(t, member, tenant.code),
  };
}

/**
 * Platform staff ready to sign in with `PASSWORD`: the database's first platform administrator is
 * bootstrapped as the migrator does, every other staff user is added as an administrator adds one
 * (`createPlatformUser`); either way the password someone else chose has already been replaced
 * (`mustChangePassword` cleared here, once for every test).
 */
export async function readyPlatformUser(
  db: Db,
  options: { role?: PlatformRole; email?: string; name?: string } = {},
): Promise<{ id: string; email: string }> {
  const role = options.role ?? "platform_admin";
  const email =
    options.email ??
    `${role === "platform_admin" ? "admin" : "staff"}${crypto.randomUUID().slice(0, 6)}@example.com`;
  const deps = { database: { db }, logger: silentLogger };
  const ctx = systemCtx("test");
  const addStaff = async () =>
    (await createPlatformUser(deps, ctx, { email, name: options.name ?? "Staff", password: PASSWORD, role }))
      .id;
  let id: string;
  if (role !== "platform_admin" || (await platformAdminExists(deps, ctx))) id = await addStaff();
  else
    id = await createPlatformAdmin(db, email).then(
      (admin) => admin.id,
      // another bootstrap won the race
      (error: unknown) => {
        if (error instanceof BootstrapRefusedError) return addStaff();
        throw error;
      },
    );
  await db.update(users).set({ mustChangePassword: false }).where(eq(users.id, id));
  return { id, email };
}

/** A platform administrator (`readyPlatformUser`) signed in through `t`'s login route. */
export async function signedInPlatformAdmin(t: SignInTarget): Promise<SignedInUser> {
  return signIn(t, await readyPlatformUser(ownerDatabaseOf(t.deps.database).db));
}
