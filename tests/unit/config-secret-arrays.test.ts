import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.ts";
import { createRedactor } from "../../src/redact.ts";

const dir = mkdtempSync(join(tmpdir(), "plinth-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("secrets inside arrays (retired master keys, certificate passwords) and storage keys are redacted", () => {
  const retired = randomBytes(32).toString("base64");
  const password = `pw-${randomBytes(8).toString("hex")}`;
  const s3Secret = `s3-${randomBytes(12).toString("hex")}`;
  writeFileSync(
    join(dir, "appsettings.json"),
    JSON.stringify({
      Security: {
        TenantSecrets: { PreviousKeys: [{ KeyId: "old", MasterKey: retired }] },
        DataProtection: { PreviousCertificates: [{ Path: "/x.pfx", Password: password }] },
      },
      Storage: { S3: { Bucket: "b", SecretAccessKey: s3Secret } },
    }),
  );
  const config = loadConfig({ env: {}, configDir: dir });
  expect(config.settings.Security.TenantSecrets.PreviousKeys).toEqual([{ KeyId: "old", MasterKey: retired }]);
  expect(config.secretValues).toEqual(expect.arrayContaining([retired, password, s3Secret]));
  const redacted = createRedactor(config.secretValues).text(`${retired} ${password} ${s3Secret}`);
  expect(redacted).toBe("[REDACTED] [REDACTED] [REDACTED]");
});

test("STORAGE_* variables override Storage:S3 and Storage keys", () => {
  const config = loadConfig({
    env: {
      STORAGE_BUCKET: "bucket-env",
      STORAGE_ENDPOINT: "http://127.0.0.1:9000",
      STORAGE_REGION: "eu-west-3",
      STORAGE_FORCE_PATH_STYLE: "true",
      STORAGE_ACCESS_KEY_ID: "AKIAEXAMPLE",
      STORAGE_SECRET_ACCESS_KEY: "secret-env",
      STORAGE_MAX_UPLOAD_BYTES: "1234",
      Storage__AllowedMimeTypes: "image/png;application/pdf",
    },
    configDir: "/nonexistent",
  });
  expect(config.settings.Storage).toEqual({
    Provider: "S3",
    MaxUploadBytes: 1234,
    AllowedMimeTypes: ["image/png", "application/pdf"],
    PresignSeconds: 900,
    S3: {
      Bucket: "bucket-env",
      Region: "eu-west-3",
      Endpoint: "http://127.0.0.1:9000",
      ForcePathStyle: true,
      AccessKeyId: "AKIAEXAMPLE",
      SecretAccessKey: "secret-env",
    },
  });
  expect(config.secretValues).toContain("secret-env");
  expect(() => loadConfig({ env: { Storage__PresignSeconds: "604801" }, configDir: "/nonexistent" })).toThrow(
    "Storage:PresignSeconds",
  );
});
