import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { createApp } from "../../src/app.ts";
import { ManualClock } from "../../src/clock.ts";
import { type AppConfig, loadConfig } from "../../src/config/load.ts";
import { execute } from "../../src/db/client.ts";
import { closeDeps, createDeps, type Deps } from "../../src/deps.ts";
import { readTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { runSecretsRotate } from "../../src/secrets-rotate.ts";
import { createDataProtection } from "../../src/security/data-protection.ts";
import { parseTenantSecretKeys } from "../../src/security/tenant-secrets.ts";
import { S3_CREDENTIALS, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { makeTestCertificates, type TestCertificates } from "../helpers/certificates.ts";
import { type SignInTarget, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

/** Every log line any part of Plinth wrote during this file: checked for secrets at the end. */
const logLines: string[] = [];
const logWrite = (line: string) => logLines.push(line);

const clock = new ManualClock("2026-11-01T12:00:00Z");
const masterKey = randomBytes(32).toString("base64");
const nextMasterKey = randomBytes(32).toString("base64");
const secretValues = [`tw-${randomBytes(12).toString("hex")}`, `sk_live_${randomBytes(12).toString("hex")}`];
let s3: TestS3;
let certs: TestCertificates;
let config: AppConfig;
let deps: Deps;
let app: ReturnType<typeof createApp>;

function testConfig(extra: Record<string, string> = {}): AppConfig {
  return loadConfig({
    env: {
      DATABASE_URL: t.url,
      Logging__Level: "debug",
      PLINTH_TENANT_SECRET_KEY_ID: "ts-2026-11",
      PLINTH_TENANT_SECRET_MASTER_KEY: masterKey,
      PLINTH_DATA_PROTECTION_APPLICATION_NAME: "plinth-http-test",
      PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certs.pfxPath,
      PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: certs.password,
      STORAGE_BUCKET: s3.bucket,
      STORAGE_ENDPOINT: s3.endpoint,
      STORAGE_REGION: "us-east-1",
      STORAGE_FORCE_PATH_STYLE: "true",
      STORAGE_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
      STORAGE_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
      STORAGE_MAX_UPLOAD_BYTES: "2048",
      Storage__AllowedMimeTypes__0: "image/png",
      Storage__AllowedMimeTypes__1: "text/plain",
      ...extra,
    },
    configDir: "/nonexistent",
  });
}

afterAll(async () => {
  await closeDeps(deps); // closes the test database's pool too
  await s3.close();
  certs.cleanup();
});
const t = useTestDatabase();
beforeAll(async () => {
  s3 = await startTestS3(clock);
  certs = makeTestCertificates();
  config = testConfig();
  deps = await createDeps(config, { database: t.database, clock, logWrite });
  app = createApp(deps);
  admin = (await signedInPlatformAdmin(signInTarget())).headers;
});

/** This file's app, to sign in through: the routes sit behind the real authentication. */
const signInTarget = (): SignInTarget => ({
  deps,
  request: async (path, init) => app.request(path, init, { peerAddress: "127.0.0.1" }),
});

let admin: Record<string, string> = {};

async function call(
  method: string,
  path: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
) {
  const response = await app.request(
    path,
    {
      method,
      headers: { "content-type": "application/json", ...options.headers },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    },
    { peerAddress: "127.0.0.1" },
  );
  const text = await response.text();
  return { status: response.status, text, json: text ? JSON.parse(text) : null, headers: response.headers };
}

async function newTenant(code = `t-${randomBytes(5).toString("hex")}`): Promise<string> {
  const res = await call("POST", "/api/admin/tenants", { body: { code, name: "Tenant" }, headers: admin });
  expect(res.status).toBe(201);
  return res.json.id;
}

describe("admin: tenants", () => {
  test("create → 201 {id, code, name, status}; show; list; suspend; duplicate code → 409", async () => {
    const code = `acme-${randomBytes(4).toString("hex")}`;
    const created = await call("POST", "/api/admin/tenants", {
      body: { code, name: "Acme" },
      headers: admin,
    });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({ id: expect.any(String), code, name: "Acme", status: "Active" });
    const id = created.json.id;
    expect((await call("GET", `/api/admin/tenants/${id}`, { headers: admin })).json.code).toBe(code);
    const list = await call("GET", "/api/admin/tenants?limit=200", { headers: admin });
    expect(list.json.items.map((x: { id: string }) => x.id)).toContain(id);
    const suspended = await call("POST", `/api/admin/tenants/${id}/suspend`, { headers: admin });
    expect(suspended.json.status).toBe("Suspended");
    const dup = await call("POST", "/api/admin/tenants", { body: { code, name: "Again" }, headers: admin });
    expect(dup.status).toBe(409);
    expect(dup.headers.get("content-type")).toContain("application/problem+json");
    const bad = await call("POST", "/api/admin/tenants", {
      body: { code: "Not Valid!", name: "x" },
      headers: admin,
    });
    expect(bad.status).toBe(400);
  });

  test("unknown or malformed tenant ids are 404 problems on every admin route", async () => {
    for (const id of ["7d4b9b34-6a5e-4c38-9b0e-2f1d8c1e0a11", "nope"]) {
      const paths: [string, string, unknown?][] = [
        ["GET", `/api/admin/tenants/${id}`],
        ["POST", `/api/admin/tenants/${id}/suspend`],
        ["GET", `/api/admin/tenants/${id}/providers`],
        ["PUT", `/api/admin/tenants/${id}/providers/sms`, { provider: "x" }],
        ["POST", `/api/admin/tenants/${id}/providers/sms/disable`],
        ["GET", `/api/admin/tenants/${id}/secrets`],
        ["PUT", `/api/admin/tenants/${id}/secrets/n`, { value: "v" }],
        ["DELETE", `/api/admin/tenants/${id}/secrets/n`],
      ];
      for (const [method, path, body] of paths) {
        const res = await call(method, path, { body, headers: admin });
        expect({ path, status: res.status, code: res.json?.code }).toEqual({
          path,
          status: 404,
          code: "not_found",
        });
      }
    }
  });

  test("without a principal 401, without the platform_admin role 403", async () => {
    const { headers: tenantUser } = (await signedInTenant(signInTarget())).owner;
    expect((await call("GET", "/api/admin/tenants")).status).toBe(401);
    expect((await call("GET", "/api/admin/tenants", { headers: tenantUser })).status).toBe(403);
    const id = await newTenant();
    expect((await call("GET", `/api/admin/tenants/${id}/secrets`, { headers: tenantUser })).status).toBe(403);
    expect((await call("PUT", `/api/admin/tenants/${id}/secrets/x`, { body: { value: "v" } })).status).toBe(
      401,
    );
  });
});

describe("admin: providers", () => {
  test("put, list, disable; secret-looking settings and unknown types are refused", async () => {
    const id = await newTenant();
    const put = await call("PUT", `/api/admin/tenants/${id}/providers/sms`, {
      body: { provider: "twilio", settings: { from: "+15550100" }, secretRefs: { authToken: "twilio-auth" } },
      headers: admin,
    });
    expect(put.status).toBe(200);
    expect(put.json).toMatchObject({
      type: "sms",
      provider: "twilio",
      status: "Active",
      secretRefs: { authToken: "twilio-auth" },
    });
    const secretish = await call("PUT", `/api/admin/tenants/${id}/providers/payment`, {
      body: { provider: "stripe", settings: { apiKey: secretValues[1] } },
      headers: admin,
    });
    expect(secretish.status).toBe(400);
    expect(secretish.text).not.toContain(secretValues[1] ?? "");
    expect(
      (
        await call("PUT", `/api/admin/tenants/${id}/providers/fax`, {
          body: { provider: "x" },
          headers: admin,
        })
      ).status,
    ).toBe(400);
    const disabled = await call("POST", `/api/admin/tenants/${id}/providers/sms/disable`, { headers: admin });
    expect(disabled.json.status).toBe("Disabled");
    const list = await call("GET", `/api/admin/tenants/${id}/providers`, { headers: admin });
    expect(list.json.items.map((p: { type: string; status: string }) => [p.type, p.status])).toEqual([
      ["sms", "Disabled"],
    ]);
    expect(
      (await call("POST", `/api/admin/tenants/${id}/providers/ai/disable`, { headers: admin })).status,
    ).toBe(404);
  });
});

describe("admin: providers, secret-looking settings at any depth", () => {
  test("nested, hyphenated and array-held secret-looking names → 400 naming each path, value never echoed, nothing stored", async () => {
    const id = await newTenant();
    const [a = "", b = ""] = secretValues;
    const refused = await call("PUT", `/api/admin/tenants/${id}/providers/sms`, {
      body: {
        provider: "x",
        settings: {
          from: "+15550100",
          auth: { apiKey: a, password: b, region: "eu" },
          "api-key": a,
          "x-auth-key": b,
          hooks: [{ url: "https://hooks.example", signing_secret: a }],
          "Private.Key": b,
        },
      },
      headers: admin,
    });
    expect(refused.status).toBe(400);
    expect(refused.json.code).toBe("validation_failed");
    expect(refused.json.errors.map((e: { path: string }) => e.path)).toEqual([
      "settings.Private.Key",
      "settings.api-key",
      "settings.auth.apiKey",
      "settings.auth.password",
      "settings.hooks[0].signing_secret",
      "settings.x-auth-key",
    ]);
    for (const value of [a, b]) expect(refused.text).not.toContain(value);
    const list = await call("GET", `/api/admin/tenants/${id}/providers`, { headers: admin });
    expect(list.json.items).toEqual([]);

    const plain = { from: "+15550100", routing: { region: "eu", weights: [{ name: "primary", share: 1 }] } };
    const ok = await call("PUT", `/api/admin/tenants/${id}/providers/sms`, {
      body: { provider: "x", settings: plain, secretRefs: { apiKey: "x-api-key" } },
      headers: admin,
    });
    expect(ok.status).toBe(200);
    expect(ok.json.settings).toEqual(plain);
  });
});

describe("admin: secrets (write-only)", () => {
  test("PUT → 204; GET lists name, key id and timestamps only; DELETE → 204 then 404", async () => {
    const id = await newTenant();
    const [value = ""] = secretValues;
    const put = await call("PUT", `/api/admin/tenants/${id}/secrets/twilio-auth`, {
      body: { value },
      headers: admin,
    });
    expect(put.status).toBe(204);
    expect(put.text).toBe("");
    const list = await call("GET", `/api/admin/tenants/${id}/secrets`, { headers: admin });
    expect(list.json).toEqual({
      items: [
        {
          name: "twilio-auth",
          // the id of the tenant's data key, which the master key ts-2026-11 wraps
          keyId: expect.stringMatching(/^tdk_/),
          createdAt: "2026-11-01T12:00:00.000Z",
          updatedAt: "2026-11-01T12:00:00.000Z",
        },
      ],
      nextCursor: null,
    });
    expect(list.text).not.toContain(value);
    // no route reads it back: not the item path, not the list
    const item = await call("GET", `/api/admin/tenants/${id}/secrets/twilio-auth`, { headers: admin });
    expect([404, 405]).toContain(item.status);
    expect(item.text).not.toContain(value);
    const { keyring } = parseTenantSecretKeys(config.settings.Security.TenantSecrets);
    if (!keyring) throw new Error("keyring");
    expect(await readTenantSecret(t.database.db, keyring, id, "twilio-auth")).toBe(value);
    const [row] = await execute<{ ciphertext: string }>(
      t.database.db,
      sql`select ciphertext from tenant_secrets where tenant_id = ${id}`,
    );
    expect(row?.ciphertext).not.toContain(value);

    expect(
      (await call("DELETE", `/api/admin/tenants/${id}/secrets/twilio-auth`, { headers: admin })).status,
    ).toBe(204);
    expect(
      (await call("DELETE", `/api/admin/tenants/${id}/secrets/twilio-auth`, { headers: admin })).status,
    ).toBe(404);
    const badName = await call("PUT", `/api/admin/tenants/${id}/secrets/${encodeURIComponent("../x")}`, {
      body: { value },
      headers: admin,
    });
    expect(badName.status).toBe(400);
    expect(badName.text).not.toContain(value);
  });

  test("another tenant's secret names are invisible", async () => {
    const a = await newTenant();
    const b = await newTenant();
    await call("PUT", `/api/admin/tenants/${a}/secrets/only-a`, {
      body: { value: secretValues[0] },
      headers: admin,
    });
    expect((await call("GET", `/api/admin/tenants/${b}/secrets`, { headers: admin })).json.items).toEqual([]);
    expect((await call("DELETE", `/api/admin/tenants/${b}/secrets/only-a`, { headers: admin })).status).toBe(
      404,
    );
  });

  test("the rotation command re-wraps every data key under the new key; old key ids keep working meanwhile", async () => {
    const id = await newTenant();
    const [, value = ""] = secretValues;
    await call("PUT", `/api/admin/tenants/${id}/secrets/stripe-key`, { body: { value }, headers: admin });
    const rotated = testConfig({
      PLINTH_TENANT_SECRET_KEY_ID: "ts-2027-01",
      PLINTH_TENANT_SECRET_MASTER_KEY: nextMasterKey,
      Security__TenantSecrets__PreviousKeys__0__KeyId: "ts-2026-11",
      Security__TenantSecrets__PreviousKeys__0__MasterKey: masterKey,
    });
    const rotatedDeps = await createDeps(rotated, { database: t.database, clock, logWrite });
    const { keyring } = parseTenantSecretKeys(rotated.settings.Security.TenantSecrets);
    if (!keyring) throw new Error("keyring");
    expect(await readTenantSecret(t.database.db, keyring, id, "stripe-key")).toBe(value);
    expect(
      await runSecretsRotate(rotated, t.database, { batchSize: 2 }, rotatedDeps.logger, () => clock.now()),
    ).toBe(0);
    expect(
      await runSecretsRotate(rotated, t.database, { batchSize: 2 }, rotatedDeps.logger, () => clock.now()),
    ).toBe(0);
    const keyIds = await execute<{ wrapping_key_id: string }>(
      t.database.db,
      sql`select distinct wrapping_key_id from tenant_data_keys`,
    );
    expect(keyIds).toEqual([{ wrapping_key_id: "ts-2027-01" }]);
    const newOnly = parseTenantSecretKeys({
      KeyId: "ts-2027-01",
      MasterKey: nextMasterKey,
      PreviousKeys: [],
    }).keyring;
    if (!newOnly) throw new Error("keyring");
    expect(await readTenantSecret(t.database.db, newOnly, id, "stripe-key")).toBe(value);
    // the old configuration no longer opens anything: its key id no longer wraps any data key
    const { keyring: oldOnly } = parseTenantSecretKeys(config.settings.Security.TenantSecrets);
    if (!oldOnly) throw new Error("keyring");
    await expect(readTenantSecret(t.database.db, oldOnly, id, "stripe-key")).rejects.toThrow();
  });
});

describe("tenant storage over HTTP", () => {
  let tenantA = "";
  let tenantB = "";
  let userA: Record<string, string> = {};
  let userB: Record<string, string> = {};
  beforeAll(async () => {
    ({
      id: tenantA,
      member: { headers: userA },
    } = await signedInTenant(signInTarget()));
    ({
      id: tenantB,
      member: { headers: userB },
    } = await signedInTenant(signInTarget()));
  });

  async function upload(
    headers: Record<string, string>,
    key: string,
    body: string,
    contentType = "text/plain",
  ) {
    const created = await call("POST", "/api/tenant/storage/uploads", {
      body: { key, contentType, size: Buffer.byteLength(body) },
      headers,
    });
    expect(created.status).toBe(201);
    const put = await fetch(created.json.url, { method: "PUT", body, headers: created.json.headers });
    expect(put.status).toBe(200);
    return created.json;
  }

  test("create an upload, list, download, delete", async () => {
    const created = await upload(userA, "notes/hello.txt", "hello from A");
    expect(created).toMatchObject({ key: "notes/hello.txt", method: "PUT", expiresAt: expect.any(String) });
    expect(created.url).toContain(`/tenants/${tenantA}/notes/hello.txt`);
    const list = await call("GET", "/api/tenant/storage/objects", { headers: userA });
    expect(list.json.items.map((i: { key: string }) => i.key)).toEqual(["notes/hello.txt"]);
    await upload(userA, "notes/second.txt", "second");
    const first = await call("GET", "/api/tenant/storage/objects?limit=1", { headers: userA });
    expect(first.json.items).toHaveLength(1);
    const next = await call("GET", `/api/tenant/storage/objects?limit=1&cursor=${first.json.nextCursor}`, {
      headers: userA,
    });
    expect(next.status).toBe(200);
    // a key or garbage where a cursor goes is a 400 naming `cursor`, not an empty page
    const rawKey = Buffer.from(JSON.stringify({ after: "../x" })).toString("base64url");
    for (const cursor of ["garbage", "notes", rawKey]) {
      const bad = await call("GET", `/api/tenant/storage/objects?cursor=${cursor}`, { headers: userA });
      expect(bad.status, cursor).toBe(400);
      expect(bad.json.errors).toEqual([{ path: "cursor", message: expect.any(String) }]);
    }
    const dl = await call(
      "GET",
      `/api/tenant/storage/objects/download?key=${encodeURIComponent("notes/hello.txt")}`,
      {
        headers: userA,
      },
    );
    expect(dl.status).toBe(200);
    expect(await (await fetch(dl.json.url)).text()).toBe("hello from A");
    expect(
      (await call("DELETE", "/api/tenant/storage/objects?key=notes/hello.txt", { headers: userA })).status,
    ).toBe(204);
    expect(
      (await call("GET", "/api/tenant/storage/objects", { headers: userA })).json.items.map(
        (i: { key: string }) => i.key,
      ),
    ).toEqual(["notes/second.txt"]);
  });

  test("limits answer 413, a type off the allowlist 400 naming contentType, before anything is stored; escapes answer 400", async () => {
    const tooBig = await call("POST", "/api/tenant/storage/uploads", {
      body: { key: "big.png", contentType: "image/png", size: 2049 },
      headers: userA,
    });
    expect([tooBig.status, tooBig.json.code]).toEqual([413, "payload_too_large"]);
    const html = await call("POST", "/api/tenant/storage/uploads", {
      body: { key: "x.html", contentType: "text/html", size: 10 },
      headers: userA,
    });
    // the document states the allowlist as contentType's pattern: a request off it is a 400 naming it
    expect([html.status, html.json.code]).toEqual([400, "validation_failed"]);
    expect(html.json.errors.map((e: { path: string }) => e.path)).toEqual(["contentType"]);
    for (const key of ["../x", "%2e%2e/x", "/abs", "a\\b", `../${tenantB}/x`]) {
      const res = await call("POST", "/api/tenant/storage/uploads", {
        body: { key, contentType: "text/plain", size: 1 },
        headers: userA,
      });
      expect({ key, status: res.status }).toEqual({ key, status: 400 });
    }
  });

  test("cross-tenant: tenant A gets 404 for tenant B's object keys", async () => {
    await upload(userB, "b-private.txt", "only for B");
    for (const key of ["b-private.txt", `tenants/${tenantB}/b-private.txt`]) {
      const q = encodeURIComponent(key);
      const dl = await call("GET", `/api/tenant/storage/objects/download?key=${q}`, { headers: userA });
      expect([dl.status, dl.json.code]).toEqual([404, "not_found"]);
      expect((await call("DELETE", `/api/tenant/storage/objects?key=${q}`, { headers: userA })).status).toBe(
        404,
      );
    }
    const listA = await call("GET", "/api/tenant/storage/objects", { headers: userA });
    expect(listA.json.items.map((i: { key: string }) => i.key)).not.toContain("b-private.txt");
    const dlB = await call("GET", "/api/tenant/storage/objects/download?key=b-private.txt", {
      headers: userB,
    });
    expect(dlB.status).toBe(200);
  });

  test("without a principal 401; a platform principal without a tenant 403", async () => {
    expect((await call("GET", "/api/tenant/storage/objects")).status).toBe(401);
    expect((await call("GET", "/api/tenant/storage/objects", { headers: admin })).status).toBe(403);
  });
});

test("the OpenAPI document describes every route of the four modules", async () => {
  const doc = await call("GET", "/api/openapi.json");
  expect(doc.status).toBe(200);
  expect(Object.keys(doc.json.paths)).toEqual(
    expect.arrayContaining([
      "/api/admin/tenants",
      "/api/admin/tenants/{tenantId}",
      "/api/admin/tenants/{tenantId}/suspend",
      "/api/admin/tenants/{tenantId}/providers/{type}",
      "/api/admin/tenants/{tenantId}/providers",
      "/api/admin/tenants/{tenantId}/providers/{type}/disable",
      "/api/admin/tenants/{tenantId}/secrets/{name}",
      "/api/admin/tenants/{tenantId}/secrets",
      "/api/tenant/storage/uploads",
      "/api/tenant/storage/objects",
      "/api/tenant/storage/objects/download",
    ]),
  );
  expect(doc.text).not.toContain(masterKey);
});

describe("data protection from the same configuration", () => {
  test("cookies round-trip under the configured certificate", async () => {
    const dp = createDataProtection(config, { db: t.database.db, clock, logger: deps.logger });
    const cookie = await dp.forPurpose("cookie", "session").protect("sid-1");
    expect(await dp.forPurpose("cookie", "session").unprotect(cookie)).toBe("sid-1");
  });
});

test("no secret value appears in anything logged during this file", () => {
  expect(logLines.length).toBeGreaterThan(10);
  const all = logLines.join("\n");
  const secrets = [
    masterKey,
    nextMasterKey,
    ...secretValues,
    certs.password,
    // s3rver's fixed secret key equals its access key id ("S3RVER"): check the real one is absent
    S3_CREDENTIALS.secretAccessKey,
  ];
  for (const secret of secrets)
    expect({ found: all.includes(secret), secret: secret.slice(0, 3) }).toEqual({
      found: false,
      secret: secret.slice(0, 3),
    });
});
