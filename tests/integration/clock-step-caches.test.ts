import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { PlanRateLimits } from "../../src/billing/plan-rate-limits.ts";
import { updateFeatureOverride } from "../../src/billing/update-feature-override.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { ssoConnections } from "../../src/db/schema/index.ts";
import { readTenantSecret, writeTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { oidcConfiguration } from "../../src/sso/oidc/oidc-configuration.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createTenant, newMasterKey, signedInTenant } from "../helpers/identity.ts";

/**
 * In-process caches after the clock is put back (docs/cache.md, "A clock put back"): an entry cached
 * while the clock read an hour ahead is read again once the clock is back, not served for its TTL
 * plus the hour. Each change below is made behind the cache's back (no NOTIFY heard, as behind a
 * transaction pooler or with a notice lost), so only the entry's age decides.
 */
const HOUR = 3_600_000;
const clock = new ManualClock(Date.now());
const start = clock.nowMs();
const ahead = () => clock.set(start + HOUR);
const app = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "ts-clock",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    "Sso:AllowPrivateProviders": "true",
  },
});

test("the session cache: a session revoked behind it is refused once the clock is put back", async () => {
  ahead();
  const tenant = await signedInTenant(app);
  const me = () => app.request("/api/auth/me", { headers: tenant.owner.headers });
  expect((await me()).status).toBe(200);
  await execute(app.db, sql`update sessions set revoked_at = now() where user_id = ${tenant.owner.id}`);
  // within SessionCacheSeconds the cached session still answers: the cache is in play
  expect((await me()).status).toBe(200);
  clock.set(start);
  expect((await me()).status).toBe(401);
});

test("the tenant lookup: a tenant suspended behind it is not found once the clock is put back; a skew is not a step", async () => {
  ahead();
  const tenant = await createTenant(app.db);
  expect(await app.deps.tenants.byCode(tenant.code)).toMatchObject({ id: tenant.id });
  await execute(app.db, sql`update tenants set status = 'Suspended' where id = ${tenant.id}`);
  expect(await app.deps.tenants.byCode(tenant.code)).toMatchObject({ id: tenant.id });
  // 20 s back: within CLOCK_STEP_BACK_MS, taken as written (and still within the 30 s TTL)
  clock.advance(-20_000);
  expect(await app.deps.tenants.byCode(tenant.code)).toMatchObject({ id: tenant.id });
  clock.set(start);
  expect(await app.deps.tenants.byCode(tenant.code)).toBeNull();
});

test("the tenant data-key cache: a key destroyed behind it no longer opens once the clock is put back", async () => {
  ahead();
  const keyring = app.deps.tenantSecretKeyring;
  if (!keyring) throw new Error("no keyring");
  const tenant = await createTenant(app.db);
  await writeTenantSecret(app.db, keyring, tenant.id, { name: "probe", value: "v1", now: clock.now() });
  expect(await readTenantSecret(app.db, keyring, tenant.id, "probe")).toBe("v1");
  // the tenant's key crypto-shredded by another process whose notice this one did not hear
  await execute(app.db, sql`delete from tenant_data_keys where tenant_id = ${tenant.id}`);
  expect(await readTenantSecret(app.db, keyring, tenant.id, "probe")).toBe("v1");
  clock.set(start);
  await expect(readTenantSecret(app.db, keyring, tenant.id, "probe")).rejects.toThrow("does not exist");
});

test("the plan limits held in process: a plan change is read once the clock is put back", async () => {
  ahead();
  const tenant = await createTenant(app.db);
  const limits = new PlanRateLimits(app.deps, 10); // as src/app.ts makes it (RateLimiting:Tenant:PlanSeconds)
  expect(await limits.perMinute(tenant.id)).toBe(600);
  await updateFeatureOverride(app.deps, systemCtx("test", tenant.id), {
    featureKey: "rate_limit_per_minute",
    enabled: true,
    limit: 5,
    reason: "test",
  });
  expect(await limits.perMinute(tenant.id)).toBe(600);
  clock.set(start);
  expect(await limits.perMinute(tenant.id)).toBe(5);
});

// A provider's discovery document, served on the loopback: its token endpoint moves between reads.
let tokenEndpoint = "token-1";
let discoveries = 0;
let provider: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  provider = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      const issuer = `http://127.0.0.1:${provider.port}`;
      if (new URL(request.url).pathname !== "/.well-known/openid-configuration")
        return new Response("not found", { status: 404 });
      discoveries++;
      return Response.json({
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/${tokenEndpoint}`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ["code"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: ["RS256"],
      });
    },
  });
});
afterAll(() => provider?.stop(true));

test("the OIDC discovery cache: a provider's new document is fetched once the clock is put back", async () => {
  ahead();
  const keyring = app.deps.tenantSecretKeyring;
  if (!keyring) throw new Error("no keyring");
  const tenant = await createTenant(app.db);
  await writeTenantSecret(app.db, keyring, tenant.id, { name: "sso.secret", value: "s", now: clock.now() });
  const [connection] = await app.db
    .insert(ssoConnections)
    .values({
      tenantId: tenant.id,
      type: "oidc",
      issuer: `http://127.0.0.1:${provider.port}`,
      clientId: "plinth",
      clientSecretName: "sso.secret",
    })
    .returning();
  if (!connection) throw new Error("no connection");
  const ctx = systemCtx("test", tenant.id);
  const tokenEndpointNow = async () =>
    (await oidcConfiguration(app.deps, ctx, connection)).serverMetadata().token_endpoint;
  expect(await tokenEndpointNow()).toEndWith("/token-1");
  tokenEndpoint = "token-2";
  expect(await tokenEndpointNow()).toEndWith("/token-1");
  expect(discoveries).toBe(1);
  clock.set(start);
  expect(await tokenEndpointNow()).toEndWith("/token-2");
  expect(discoveries).toBe(2);
});
