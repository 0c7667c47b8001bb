import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { HeadObjectCommand, ListObjectsV2Command, type S3Client } from "@aws-sdk/client-s3";
import { ManualClock } from "../../src/clock.ts";
import { ObjectStorage } from "../../src/storage/object-storage.ts";
import { createS3Client } from "../../src/storage/s3-client.ts";
import { S3_CREDENTIALS, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { verifyPresigned } from "../helpers/sigv4.ts";

const clock = new ManualClock("2026-11-01T12:00:00Z");
let s3: TestS3;
let client: S3Client;
let storage: ObjectStorage;

beforeAll(async () => {
  s3 = await startTestS3(clock);
  client = createS3Client({
    Bucket: s3.bucket,
    Region: "us-east-1",
    Endpoint: s3.endpoint,
    ForcePathStyle: true,
    AccessKeyId: S3_CREDENTIALS.accessKeyId,
    SecretAccessKey: S3_CREDENTIALS.secretAccessKey,
  });
  storage = new ObjectStorage({
    client,
    bucket: s3.bucket,
    maxUploadBytes: 1024,
    allowedMimeTypes: ["image/png", "text/plain"],
    presignSeconds: 300,
    clock,
  });
});
afterAll(() => s3.close());

async function stored(fullKey: string): Promise<boolean> {
  try {
    await client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: fullKey }));
    return true;
  } catch {
    return false;
  }
}

async function allKeys(): Promise<string[]> {
  const out = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
  return (out.Contents ?? []).map((o) => o.Key ?? "");
}

async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "ok";
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

describe("object storage on a real S3-compatible server", () => {
  test("server-side put and get, under the tenant prefix", async () => {
    const tenant = randomUUID();
    await storage.putObject(tenant, {
      key: "docs/a.txt",
      body: new TextEncoder().encode("hello"),
      contentType: "text/plain",
    });
    expect(await stored(`tenants/${tenant}/docs/a.txt`)).toBe(true);
    const got = await storage.getObject(tenant, "docs/a.txt");
    expect(new TextDecoder().decode(got.body)).toBe("hello");
    expect(got.contentType).toBe("text/plain");
  });

  test("size limit and MIME allowlist are enforced before anything is stored", async () => {
    const tenant = randomUUID();
    const before = await allKeys();
    expect(
      await code(
        storage.putObject(tenant, { key: "big.png", body: new Uint8Array(1025), contentType: "image/png" }),
      ),
    ).toBe("payload_too_large");
    expect(
      await code(
        storage.putObject(tenant, { key: "x.html", body: new Uint8Array(3), contentType: "text/html" }),
      ),
    ).toBe("unsupported_media_type");
    expect(
      await code(
        storage.putObject(tenant, { key: "x.svg", body: new Uint8Array(3), contentType: "image/svg+xml" }),
      ),
    ).toBe("unsupported_media_type");
    expect(
      await code(
        storage.putObject(tenant, {
          key: "x.txt",
          body: new Uint8Array(3),
          contentType: "text/plain\r\nx-evil: 1",
        }),
      ),
    ).toBe("unsupported_media_type");
    expect(
      await code(storage.createUpload(tenant, { key: "big.png", contentType: "image/png", size: 1025 })),
    ).toBe("payload_too_large");
    expect(
      await code(
        storage.createUpload(tenant, { key: "a.exe", contentType: "application/x-msdownload", size: 3 }),
      ),
    ).toBe("unsupported_media_type");
    expect(
      await code(storage.createUpload(tenant, { key: "n.png", contentType: "image/png", size: -1 })),
    ).toBe("validation_failed");
    expect(await allKeys()).toEqual(before);
    // exactly at the limit is fine; parameters on an allowed type are kept
    await storage.putObject(tenant, {
      key: "edge.txt",
      body: new Uint8Array(1024),
      contentType: "text/plain; charset=utf-8",
    });
    expect(await stored(`tenants/${tenant}/edge.txt`)).toBe(true);
  });

  test("prefix escape attempts never reach the store", async () => {
    const tenant = randomUUID();
    const victim = randomUUID();
    await storage.putObject(victim, {
      key: "secret.txt",
      body: new TextEncoder().encode("victim"),
      contentType: "text/plain",
    });
    const before = await allKeys();
    const attempts = [
      `../${victim}/secret.txt`,
      `..%2f${victim}%2fsecret.txt`,
      `%2e%2e/${victim}/secret.txt`,
      `%252e%252e%252f${victim}/secret.txt`,
      `/tenants/${victim}/secret.txt`,
      `..\\${victim}\\secret.txt`,
      `x/\u0000/../../${victim}/secret.txt`,
      `\uff0e\uff0e/${victim}/secret.txt`,
    ];
    for (const key of attempts) {
      expect(
        await code(storage.putObject(tenant, { key, body: new Uint8Array(1), contentType: "text/plain" })),
      ).toBe("validation_failed");
      expect(await code(storage.createUpload(tenant, { key, contentType: "text/plain", size: 1 }))).toBe(
        "validation_failed",
      );
      expect(await code(storage.createDownload(tenant, key))).toBe("validation_failed");
      expect(await code(storage.deleteObject(tenant, key))).toBe("validation_failed");
    }
    expect(await allKeys()).toEqual(before);
    expect(await stored(`tenants/${victim}/secret.txt`)).toBe(true);
  });

  test("cross-tenant reads are refused: another tenant's key is simply not found", async () => {
    const a = randomUUID();
    const b = randomUUID();
    await storage.putObject(b, {
      key: "private.txt",
      body: new TextEncoder().encode("b only"),
      contentType: "text/plain",
    });
    expect(await code(storage.getObject(a, "private.txt"))).toBe("not_found");
    expect(await code(storage.createDownload(a, "private.txt"))).toBe("not_found");
    expect(await code(storage.createDownload(a, `tenants/${b}/private.txt`))).toBe("not_found");
    expect(await code(storage.deleteObject(a, "private.txt"))).toBe("not_found");
    expect((await storage.listObjects(a, { limit: 100 })).items).toEqual([]);
    expect((await storage.listObjects(b, { limit: 100 })).items.map((i) => i.key)).toEqual(["private.txt"]);
    expect(await stored(`tenants/${b}/private.txt`)).toBe(true);
  });

  test("list pages through the tenant's objects, keys relative to its prefix", async () => {
    const tenant = randomUUID();
    for (const key of ["p/1.txt", "p/2.txt", "p/3.txt", "q/4.txt"])
      await storage.putObject(tenant, { key, body: new Uint8Array(1), contentType: "text/plain" });
    const all = await storage.listObjects(tenant, { limit: 100 });
    expect(all.items.map((i) => i.key).sort()).toEqual(["p/1.txt", "p/2.txt", "p/3.txt", "q/4.txt"]);
    expect(all.last).toBeNull();
    const underP = await storage.listObjects(tenant, { prefix: "p/", limit: 100 });
    expect(underP.items.map((i) => i.key).sort()).toEqual(["p/1.txt", "p/2.txt", "p/3.txt"]);
    // s3rver's file store does not return keys in S3's lexicographic order, so only the page
    // mechanics are checked here: the limit holds, the position is the page's last relative key,
    // and the next page starts after it
    const first = await storage.listObjects(tenant, { prefix: "p/", limit: 2 });
    expect(first.items).toHaveLength(2);
    expect(first.last).toBe(first.items.at(-1)?.key ?? "");
    const second = await storage.listObjects(tenant, {
      prefix: "p/",
      limit: 2,
      after: first.last ?? "",
    });
    expect(second.items.every((i) => i.key > (first.last ?? ""))).toBe(true);
    expect(await code(storage.listObjects(tenant, { prefix: "p/", limit: 2, after: "../x" }))).toBe(
      "validation_failed",
    );
    expect(await code(storage.listObjects(tenant, { prefix: "../", limit: 2 }))).toBe("validation_failed");
  });

  test("presigned upload: signs content type and exact length, is honoured, and refuses anything else", async () => {
    const tenant = randomUUID();
    const grantId = randomUUID();
    const upload = await storage.createUpload(tenant, {
      key: "img/up.png",
      contentType: "image/png",
      size: 8,
      grantId,
    });
    expect(upload.objectKey).toBe(`tenants/${tenant}/img/up.png~g~${grantId}`);
    expect(upload.headers).toEqual({ "content-type": "image/png", "content-length": "8" });
    expect(upload.expiresAt.toISOString()).toBe("2026-11-01T12:05:00.000Z");
    const url = new URL(upload.url);
    // the grant's own object version: no other URL writes this name
    expect(decodeURIComponent(url.pathname)).toBe(`/${s3.bucket}/${upload.objectKey}`);
    expect(url.searchParams.get("X-Amz-Expires")).toBe("300");
    expect(url.searchParams.get("X-Amz-SignedHeaders")).toBe("content-length;content-type;host");

    const put = (body: Uint8Array, contentType: string, target = upload.url) =>
      fetch(target, { method: "PUT", body, headers: { "content-type": contentType } });
    expect((await put(new Uint8Array(9), "image/png")).status).toBe(403); // longer than signed
    expect((await put(new Uint8Array(8), "text/html")).status).toBe(403); // other type than signed
    const tampered = new URL(upload.url);
    tampered.pathname = tampered.pathname.replace(tenant, randomUUID());
    expect((await put(new Uint8Array(8), "image/png", tampered.toString())).status).toBe(403);
    const longer = new URL(upload.url);
    longer.searchParams.set("X-Amz-Expires", "604800");
    expect((await put(new Uint8Array(8), "image/png", longer.toString())).status).toBe(403);
    expect(await stored(upload.objectKey)).toBe(false);

    const ok = await put(new Uint8Array(8).fill(7), "image/png");
    expect(ok.status).toBe(200);
    expect(await stored(upload.objectKey)).toBe(true);
    // the tenant sees its own key, and reads the version the upload wrote
    expect((await storage.listObjects(tenant, { limit: 10 })).items.map((i) => i.key)).toEqual([
      "img/up.png",
    ]);
    expect((await storage.getObject(tenant, "img/up.png")).body).toEqual(new Uint8Array(8).fill(7));
    expect(s3.refusals).toEqual(expect.arrayContaining(["signature mismatch"]));
  });

  test("presigned URLs expire (injected clock); download URLs open the object as an attachment", async () => {
    const tenant = randomUUID();
    const upload = await storage.createUpload(tenant, {
      key: "late.txt",
      contentType: "text/plain",
      size: 2,
    });
    clock.advance(301_000);
    const late = await fetch(upload.url, {
      method: "PUT",
      body: "hi",
      headers: { "content-type": "text/plain" },
    });
    expect(late.status).toBe(403);
    expect(await stored(`tenants/${tenant}/late.txt`)).toBe(false);

    await storage.putObject(tenant, {
      key: "dl.txt",
      body: new TextEncoder().encode("download me"),
      contentType: "text/plain",
    });
    const download = await storage.createDownload(tenant, "dl.txt");
    const got = await fetch(download.url);
    expect(got.status).toBe(200);
    expect(await got.text()).toBe("download me");
    expect(got.headers.get("content-disposition")).toBe('attachment; filename="dl.txt"');
    const verdict = await verifyPresigned({
      method: "GET",
      url: download.url,
      headers: {},
      now: clock.now(),
      credentials: S3_CREDENTIALS,
    });
    expect(verdict.ok).toBe(true);
    clock.advance(300_000);
    expect((await fetch(download.url)).status).toBe(403);
  });

  test("delete removes only the tenant's own object", async () => {
    const tenant = randomUUID();
    await storage.putObject(tenant, { key: "gone.txt", body: new Uint8Array(1), contentType: "text/plain" });
    await storage.deleteObject(tenant, "gone.txt");
    expect(await stored(`tenants/${tenant}/gone.txt`)).toBe(false);
    expect(await code(storage.deleteObject(tenant, "gone.txt"))).toBe("not_found");
  });
});
