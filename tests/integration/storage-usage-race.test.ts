import { afterAll, beforeAll, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { settleStorageRefunds } from "../../src/storage/tenant-objects.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { S3_CREDENTIALS, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { bearer, createTenant, createUser, json, loginTokens } from "../helpers/identity.ts";

/**
 * Deletes of one object that race: each request's HEAD sees the object before any DELETE removes
 * it. A proxy in front of the S3 fixture holds HEAD answers until `HEADS` of them have arrived, so
 * the interleaving is forced, not hoped for.
 */
const HEADS = 4;
const clock = new ManualClock(new Date().toISOString());
let s3: TestS3;
let proxy: ReturnType<typeof Bun.serve>;
let waiting: (() => void)[] = [];

beforeAll(async () => {
  s3 = await startTestS3(clock);
  proxy = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const url = new URL(req.url);
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
      const answer = await fetch(`${s3.endpoint}${url.pathname}${url.search}`, {
        method: req.method,
        headers: req.headers,
        body,
      });
      const payload = await answer.arrayBuffer();
      if (req.method === "HEAD") {
        // the barrier: the last HEAD to arrive releases them all
        const arrived = new Promise<void>((resolve) => waiting.push(resolve));
        if (waiting.length >= HEADS) {
          for (const release of waiting) release();
          waiting = [];
        }
        await arrived;
      }
      return new Response(req.method === "HEAD" ? null : payload, {
        status: answer.status,
        headers: answer.headers,
      });
    },
  });
});
afterAll(async () => {
  await proxy.stop(true);
  await s3.close();
});
const app = useTestApp({
  clock,
  settings: relaxedLimits,
  env: () => ({
    STORAGE_BUCKET: s3.bucket,
    STORAGE_ENDPOINT: `http://127.0.0.1:${proxy.port}`,
    STORAGE_REGION: "us-east-1",
    STORAGE_FORCE_PATH_STYLE: "true",
    STORAGE_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
    STORAGE_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
    Storage__AllowedMimeTypes__0: "text/plain",
  }),
});
const t = app.testDatabase;

test("deletes of one object racing each other give its bytes back once", async () => {
  const tenant = await createTenant(t.database.db);
  const user = await createUser(t.database.db, tenant.id);
  const { accessToken } = await loginTokens(app, { email: user.email, tenant: tenant.code });
  const auth = { authorization: `Bearer ${accessToken}` };
  const usage = () =>
    getCurrentUsage(app.deps, systemCtx("test", tenant.id), { feature: "storage_bytes", period: "never" });

  const granted = await app.request(
    "/api/tenant/storage/uploads",
    json({ key: "report.txt", contentType: "text/plain", size: 1000 }, auth),
  );
  expect(granted.status).toBe(201);
  const upload = (await granted.json()) as { url: string; headers: Record<string, string> };
  const put = await fetch(upload.url, { method: "PUT", body: "x".repeat(1000), headers: upload.headers });
  expect(put.status).toBe(200);
  expect(await usage()).toBe(1000);

  const statuses = await Promise.all(
    Array.from({ length: HEADS }, () =>
      app.request("/api/tenant/storage/objects?key=report.txt", { method: "DELETE", ...bearer(accessToken) }),
    ).map((r) => r.then((response) => response.status)),
  );
  expect(statuses).toEqual(Array(HEADS).fill(204)); // every HEAD saw the object
  // the URL still works until it expires: the bytes stay charged until then, and are refunded once
  expect(await usage()).toBe(1000);
  clock.advance(961_000);
  await Promise.all(
    Array.from({ length: HEADS }, () => settleStorageRefunds(app.deps, systemCtx("test", tenant.id))),
  );
  expect(await usage()).toBe(0);
});
