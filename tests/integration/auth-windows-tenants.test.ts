import { expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { useTestApp } from "../helpers/app.ts";
import { activeDomain, createSharedUser, createTenant, login } from "../helpers/identity.ts";

/**
 * Issue #32: the password windows of a shared identity (one person in several tenants) are per
 * tenant and address. A stranger hammering the person's address on tenant A's host — until that
 * address is refused and past the account-wide slow-down — changes nothing on tenant B's host: the
 * person signs in there at once, even from the stranger's own client address.
 */
const clock = new ManualClock("2026-11-27T10:00:00Z");
const app = useTestApp({
  clock,
  cache: "auth-windows-tenants",
  env: {
    RateLimiting__Auth__PermitLimit: "100000",
    // a low account-wide slow-down, reached here with a handful of addresses
    Authentication__Password__AccountAttemptLimit: "4",
  },
});
const db = () => app.testDatabase.database.db;

test("a stranger hammering tenant A's host locks the person out of neither tenant B nor A from elsewhere", async () => {
  const a = await createTenant(db());
  const b = await createTenant(db());
  const hostA = await activeDomain(db(), a.id, `login.${a.code}.test`);
  const hostB = await activeDomain(db(), b.id, `login.${b.code}.test`);
  const pat = await createSharedUser(db(), [{ tenantId: a.id }, { tenantId: b.id }]);
  const stranger = "203.0.113.40";
  const wrongOnA = (peer: string) =>
    login(app, { email: pat.email, password: "wrong-guess-0001" }, { host: hostA, peer });

  // from the stranger's address: three failures, then slowed, then refused on A
  for (let i = 0; i < 3; i++) expect((await wrongOnA(stranger)).status).toBe(401);
  expect((await wrongOnA(stranger)).status).toBe(429);
  clock.advance(1_000);
  expect((await wrongOnA(stranger)).status).toBe(401);
  clock.advance(2_000);
  expect((await wrongOnA(stranger)).status).toBe(401);
  clock.advance(4_000);
  const refused = await wrongOnA(stranger);
  expect(refused.status).toBe(429);
  expect(refused.headers.get("ratelimit")).toStartWith('"password-address";');
  // from another address: the account's sixth attempt, past the account-wide limit (4), so the
  // next one on A from anywhere must wait 4 s
  expect((await wrongOnA("203.0.113.41")).status).toBe(401);
  const slowedOnA = await login(app, { email: pat.email }, { host: hostA, peer: "198.51.100.7" });
  expect(slowedOnA.status).toBe(429);
  expect(slowedOnA.headers.get("ratelimit")).toStartWith('"password-account";');

  // tenant B's host: the person gets in at once, from their own address and from the stranger's
  expect((await login(app, { email: pat.email }, { host: hostB, peer: "198.51.100.7" })).status).toBe(200);
  expect((await login(app, { email: pat.email }, { host: hostB, peer: stranger })).status).toBe(200);
  // the same through B's tenant code on the platform host
  expect((await login(app, { email: pat.email, tenant: b.code }, { peer: "198.51.100.8" })).status).toBe(200);
  // and on A, once the slow-down's wait has passed, from an address that never failed
  clock.advance(60_000);
  expect((await login(app, { email: pat.email }, { host: hostA, peer: "198.51.100.7" })).status).toBe(200);
  // the stranger's address stays refused on A for the rest of its window
  expect((await login(app, { email: pat.email }, { host: hostA, peer: stranger })).status).toBe(429);
});
