import { expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { apiKeyUseRecorder } from "../../src/api-keys/key-lookup.ts";
import { markApiKeyUsed } from "../../src/api-keys/keys.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { apiKeys, scimTokens } from "../../src/db/schema/index.ts";
import { markScimTokenUsed } from "../../src/scim/scim-tokens.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, type SignedInTenant, signedInTenant } from "../helpers/identity.ts";

/**
 * "Last used" stamps after the clock is put back (docs/cache.md, "A clock put back"): a use stored
 * while the clock read an hour ahead does not hold back recording the next use for that hour; a step
 * back under a minute (CLOCK_STEP_BACK_MS) is a skew and keeps the once-a-minute throttle.
 */
const HOUR = 3_600_000;
const clock = new ManualClock(Date.now());
const start = clock.nowMs();
const app = useTestApp({ clock, settings: relaxedLimits, cache: "lastuse" });

async function newKey(tenant: SignedInTenant): Promise<{ id: string; key: string }> {
  const response = await app.request(
    "/api/tenant/api-keys",
    json({ name: "clock", scopes: ["users:read"] }, tenant.owner.headers),
  );
  expect(response.status).toBe(201);
  return (await response.json()) as { id: string; key: string };
}

async function keyLastUse(id: string): Promise<number | undefined> {
  await app.deps.pending.settled(5_000);
  const [row] = await app.db.select({ at: apiKeys.lastUsedAt }).from(apiKeys).where(eq(apiKeys.id, id));
  return row?.at?.getTime();
}

test("an API key used through the API: recorded again once the clock is put back an hour, not after a 30 s step", async () => {
  clock.set(start + HOUR);
  const tenant = await signedInTenant(app);
  const { id, key } = await newKey(tenant);
  const use = async () =>
    expect(
      (await app.request("/api/tenant/users", { headers: { authorization: `Bearer ${key}` } })).status,
    ).toBe(200);
  await use();
  expect(await keyLastUse(id)).toBe(start + HOUR);
  clock.advance(-30_000);
  await use();
  expect(await keyLastUse(id)).toBe(start + HOUR);
  clock.set(start);
  await use();
  expect(await keyLastUse(id)).toBe(start);
});

test("apiKeyUseRecorder: this process tries again once the clock is put back an hour, not after a 30 s step", async () => {
  clock.set(start + HOUR);
  const tenant = await signedInTenant(app);
  const { id } = await newKey(tenant);
  const ctx = systemCtx("test", tenant.id);
  const record = apiKeyUseRecorder(app.deps);
  record(ctx, id);
  expect(await keyLastUse(id)).toBe(start + HOUR);
  // the row set back behind the recorder (as another process's write could be): only the
  // recorder's own memory decides whether it asks again
  const setStoredUse = (at: number | null) =>
    app.db
      .update(apiKeys)
      .set({ lastUsedAt: at === null ? null : new Date(at) })
      .where(eq(apiKeys.id, id));
  await setStoredUse(null);
  clock.advance(-30_000);
  record(ctx, id);
  expect(await keyLastUse(id)).toBeUndefined();
  clock.set(start);
  record(ctx, id);
  expect(await keyLastUse(id)).toBe(start);
});

test("markApiKeyUsed: a stored use an hour ahead is stale and replaced; 30 s ahead keeps the minute", async () => {
  clock.set(start + HOUR);
  const tenant = await signedInTenant(app);
  const { id } = await newKey(tenant);
  const ctx = { ...systemCtx("test", tenant.id), clientIp: "192.0.2.20" };
  expect(await markApiKeyUsed(app.deps, ctx, { keyId: id })).toEqual({ firstUse: true });
  clock.advance(-30_000);
  expect(await markApiKeyUsed(app.deps, { ...ctx, clientIp: "192.0.2.21" }, { keyId: id })).toBeNull();
  clock.set(start);
  expect(await markApiKeyUsed(app.deps, { ...ctx, clientIp: "192.0.2.22" }, { keyId: id })).toEqual({
    firstUse: false,
  });
  const [row] = await app.db
    .select({ at: apiKeys.lastUsedAt, ip: apiKeys.lastUsedIp })
    .from(apiKeys)
    .where(eq(apiKeys.id, id));
  expect(row).toEqual({ at: new Date(start), ip: "192.0.2.22" });
});

test("a SCIM token: its use is recorded again once the clock is put back an hour, not after a 30 s step", async () => {
  clock.set(start + HOUR);
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const created = await app.request("/api/tenant/scim/tokens", json({ name: "Okta" }, tenant.owner.headers));
  expect(created.status).toBe(201);
  const { id, token } = (await created.json()) as { id: string; token: string };
  const lastUse = async () => {
    await app.deps.pending.settled(5_000);
    const [row] = await app.db
      .select({ at: scimTokens.lastUsedAt })
      .from(scimTokens)
      .where(eq(scimTokens.id, id));
    return row?.at?.getTime();
  };
  const use = async () =>
    expect(
      (await app.request("/scim/v2/Users", { headers: { authorization: `Bearer ${token}` } })).status,
    ).toBe(200);
  await use();
  expect(await lastUse()).toBe(start + HOUR);
  clock.advance(-30_000);
  await use();
  expect(await lastUse()).toBe(start + HOUR);
  clock.set(start);
  await use();
  expect(await lastUse()).toBe(start);
  // and the statement on its own, as another process runs it: a minute on, recorded once
  const ctx = systemCtx("test", tenant.id);
  clock.advance(59_999);
  await markScimTokenUsed(app.deps, ctx, { tokenId: id });
  expect(await lastUse()).toBe(start);
  clock.advance(1);
  await markScimTokenUsed(app.deps, ctx, { tokenId: id });
  expect(await lastUse()).toBe(start + 60_000);
});
