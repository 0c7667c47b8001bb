import { afterAll, beforeAll, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { s3Settings, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createUser, readyPlatformUser, signedInTenant, signInHeaders } from "../helpers/identity.ts";

/**
 * The quota holds against a real S3-compatible server (s3rver behind the front that verifies
 * presigned URLs as S3 does): a presigned upload is one object version of one size, charged when
 * granted; reusing its URL after a delete, or sending more bytes, cannot store uncharged bytes.
 */
const clock = new ManualClock(Date.now());
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3(clock);
}, 30_000);
afterAll(() => s3.close(), 30_000);
const h = useTestApp({
  cache: "storage-quota",
  clock,
  settings: () => ({ ...relaxedLimits, ...s3Settings(s3) }),
});
const t = h.testDatabase;
const request = (path: string, init: RequestInit = {}) =>
  h.app.request(path, init, { peerAddress: "127.0.0.1" });
const signIn = (body: { email: string; tenant?: string }) => signInHeaders(request, body);

let platformAdminEmail: string | null = null;
/** A tenant on the pro plan whose storage limit a platform administrator overrides to `limit`. */
async function proTenant(limit: number) {
  const tenant = await signedInTenant(h, { plan: "pro" });
  platformAdminEmail ??= (await readyPlatformUser(t.database.db)).email;
  // signed in each time: tests move the clock past a token's lifetime
  const admin = await signIn({ email: platformAdminEmail });
  const override = await request(`/api/admin/tenants/${tenant.id}/features/storage_bytes/override`, {
    method: "PUT",
    headers: { ...admin, "content-type": "application/json" },
    body: JSON.stringify({ enabled: true, limit }),
  });
  expect(override.status).toBe(204);
  return tenant;
}

const grant = (headers: Record<string, string>, key: string, size: number) =>
  request("/api/tenant/storage/uploads", {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ key, contentType: "text/plain", size }),
  });
const remove = (headers: Record<string, string>, key: string) =>
  request(`/api/tenant/storage/objects?key=${encodeURIComponent(key)}`, { method: "DELETE", headers });
const keys = async (headers: Record<string, string>) =>
  (
    (await (await request("/api/tenant/storage/objects", { headers })).json()) as { items: { key: string }[] }
  ).items.map((i) => i.key);

test("upload, delete, PUT the same URL again: never more bytes stored than charged, refunded once", async () => {
  const tenant = await proTenant(124);
  const { owner } = tenant;
  let { headers } = owner;
  const usage = () =>
    getCurrentUsage(h.deps, systemCtx("test", tenant.id), { feature: "storage_bytes", period: "never" });

  const granted = await grant(headers, "a.txt", 100);
  expect(granted.status).toBe(201);
  const upload = (await granted.json()) as { url: string; headers: Record<string, string> };
  const put = (body: string) =>
    fetch(upload.url, { method: "PUT", body, headers: { "content-type": "text/plain" } });

  // more bytes than granted: the signed length refuses them
  expect((await put("x".repeat(101))).status).toBe(403);
  expect((await put("x".repeat(100))).status).toBe(200);
  expect(await usage()).toBe(100);

  expect((await remove(headers, "a.txt")).status).toBe(204);
  expect(await keys(headers)).toEqual([]);
  // the URL still works until it expires, so the bytes stay charged until then
  expect(await usage()).toBe(100);
  expect((await put("y".repeat(100))).status).toBe(200);
  expect(await keys(headers)).toEqual(["a.txt"]);
  expect(await usage()).toBe(100);
  // a second round cannot pass the limit: 100 charged + 100 > 124
  expect((await grant(headers, "b.txt", 100)).status).toBe(403);

  expect((await remove(headers, "a.txt")).status).toBe(204);
  clock.advance(961_000); // Storage:PresignSeconds (900) and the 60 s clock-skew margin later the URL is dead
  expect((await put("z".repeat(100))).status).toBe(403);
  headers = await signIn({ email: owner.email, tenant: tenant.code });
  // the next storage call settles: the version is deleted once more, its charge refunded once
  expect(await keys(headers)).toEqual([]);
  expect(await usage()).toBe(0);
  expect((await remove(headers, "a.txt")).status).toBe(404);
  expect(await keys(headers)).toEqual([]);
  expect(await usage()).toBe(0); // never below zero

  // and the quota is whole again
  expect((await grant(headers, "c.txt", 124)).status).toBe(201);
  expect(await usage()).toBe(124);
});

test("a delete after the URL expired refunds at once, exactly the granted size", async () => {
  const tenant = await proTenant(1000);
  const { owner } = tenant;
  const { headers } = owner;
  const usage = () =>
    getCurrentUsage(h.deps, systemCtx("test", tenant.id), { feature: "storage_bytes", period: "never" });
  const upload = (await (await grant(headers, "d.txt", 10)).json()) as { url: string };
  expect(
    (
      await fetch(upload.url, {
        method: "PUT",
        body: "0123456789",
        headers: { "content-type": "text/plain" },
      })
    ).status,
  ).toBe(200);
  clock.advance(961_000);
  const again = await signIn({ email: owner.email, tenant: tenant.code });
  expect((await remove(again, "d.txt")).status).toBe(204);
  expect(await usage()).toBe(0);
});

test("members delete only the objects they uploaded; owners and admins any", async () => {
  const tenant = await proTenant(10_000);
  const [asOwner, asMember, asAdmin] = [tenant.owner.headers, tenant.member.headers, tenant.admin.headers];
  for (const [headers, key] of [
    [asOwner, "owner.txt"],
    [asMember, "member.txt"],
    [asMember, "member2.txt"],
  ] as const) {
    const upload = (await (await grant(headers, key, 3)).json()) as { url: string };
    const put = await fetch(upload.url, {
      method: "PUT",
      body: "abc",
      headers: { "content-type": "text/plain" },
    });
    expect(put.status).toBe(200);
  }
  const refused = await remove(asMember, "owner.txt");
  expect(refused.status).toBe(403);
  expect(((await refused.json()) as { code: string }).code).toBe("forbidden");
  expect((await remove(asMember, "member.txt")).status).toBe(204);
  expect((await remove(asAdmin, "member2.txt")).status).toBe(204);
  expect((await remove(asOwner, "owner.txt")).status).toBe(204);
  expect(await keys(asOwner)).toEqual([]);
});

test("a member cannot overwrite another member's object; the first writer keeps it and its delete", async () => {
  const tenant = await proTenant(10_000);
  const other = await createUser(t.database.db, tenant.id, { role: "member" });
  const [first, second] = [tenant.member.headers, await signIn({ email: other.email, tenant: tenant.code })];
  const put = async (headers: Record<string, string>, key: string, body: string) => {
    const granted = await grant(headers, key, body.length);
    if (granted.status !== 201) return granted.status;
    const { url } = (await granted.json()) as { url: string };
    return (await fetch(url, { method: "PUT", body, headers: { "content-type": "text/plain" } })).status;
  };
  // an open URL of the first writer already holds the key against the second
  const open = await grant(first, "shared/report.txt", 3);
  expect(open.status).toBe(201);
  const early = await grant(second, "shared/report.txt", 3);
  expect(early.status).toBe(403);
  const { url } = (await open.json()) as { url: string };
  expect(
    (await fetch(url, { method: "PUT", body: "one", headers: { "content-type": "text/plain" } })).status,
  ).toBe(200);
  // the reported case: the second member's grant was 201 and their PUT replaced what everyone downloads
  const refused = await grant(second, "shared/report.txt", 3);
  expect(refused.status).toBe(403);
  expect(((await refused.json()) as { code: string }).code).toBe("forbidden");
  expect((await remove(second, "shared/report.txt")).status).toBe(403);
  const download = await request(`/api/tenant/storage/objects/download?key=shared%2Freport.txt`, {
    headers: second,
  });
  const { url: readUrl } = (await download.json()) as { url: string };
  expect(await (await fetch(readUrl)).text()).toBe("one");
  // the first writer writes again, and still deletes; owners and admins overwrite as they delete
  expect(await put(first, "shared/report.txt", "two")).toBe(200);
  expect((await remove(first, "shared/report.txt")).status).toBe(204);
  expect(await put(second, "shared/report.txt", "new")).toBe(200);
  expect(await put(tenant.admin.headers, "shared/report.txt", "adm")).toBe(200);
  expect((await remove(second, "shared/report.txt")).status).toBe(403);
  expect((await remove(tenant.owner.headers, "shared/report.txt")).status).toBe(204);
});

test("an upload URL never used is refunded once it has expired; a used one stays charged", async () => {
  const tenant = await proTenant(1000);
  const { owner } = tenant;
  const { headers } = owner;
  const usage = () =>
    getCurrentUsage(h.deps, systemCtx("test", tenant.id), { feature: "storage_bytes", period: "never" });
  expect((await grant(headers, "never.txt", 40)).status).toBe(201);
  const used = (await (await grant(headers, "used.txt", 3)).json()) as { url: string };
  expect(
    (await fetch(used.url, { method: "PUT", body: "abc", headers: { "content-type": "text/plain" } })).status,
  ).toBe(200);
  expect(await usage()).toBe(43);
  clock.advance(961_000);
  const again = await signIn({ email: owner.email, tenant: tenant.code });
  expect(await keys(again)).toEqual(["used.txt"]);
  expect(await usage()).toBe(3);
  expect(await keys(again)).toEqual(["used.txt"]); // settled once: nothing more is refunded
  expect(await usage()).toBe(3);
});
