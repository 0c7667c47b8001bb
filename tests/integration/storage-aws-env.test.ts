import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { ManualClock } from "../../src/clock.ts";
import { S3_CREDENTIALS, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { stopChildrenAfterAll, tracked } from "../helpers/children.ts";

const root = join(import.meta.dir, "../..");
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3(new ManualClock());
});
afterAll(() => s3.close());
stopChildrenAfterAll();

// In a child process: the AWS SDK reads AWS_* from its own environment, which a test must not change in-process.
const script = `
import { loadConfig } from "./src/config/load.ts";
import { createObjectStorage } from "./src/storage/object-storage.ts";
const config = loadConfig({ configDir: "/nonexistent" });
const storage = createObjectStorage(config, { clock: { now: () => new Date() } });
const tenant = crypto.randomUUID();
await storage.putObject(tenant, { key: "env.txt", body: new TextEncoder().encode("via AWS_*"), contentType: "text/plain" });
const got = await storage.getObject(tenant, "env.txt");
console.log(JSON.stringify({ text: new TextDecoder().decode(got.body), secrets: config.secretValues.includes(process.env.AWS_SECRET_ACCESS_KEY) }));
`;

async function run(env: Record<string, string>) {
  // asynchronous: the S3 server runs in this process and must keep answering
  const proc = tracked(
    Bun.spawn(["bun", "-e", script], {
      cwd: root,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/nonexistent-home", ...env },
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { stdout, stderr, exitCode };
}

test("without Storage:S3 keys the SDK's default chain takes AWS_* (credentials and region) from the environment", async () => {
  const proc = await run({
    STORAGE_BUCKET: s3.bucket,
    STORAGE_ENDPOINT: s3.endpoint,
    STORAGE_FORCE_PATH_STYLE: "true",
    AWS_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
    AWS_REGION: "us-east-1",
  });
  expect(proc.stderr).toBe("");
  expect(JSON.parse(proc.stdout)).toEqual({ text: "via AWS_*", secrets: true });
});

test("without any credentials anywhere, the first request fails (nothing falls back to anonymous)", async () => {
  const proc = await run({
    STORAGE_BUCKET: s3.bucket,
    STORAGE_ENDPOINT: s3.endpoint,
    STORAGE_FORCE_PATH_STYLE: "true",
    AWS_REGION: "us-east-1",
    AWS_EC2_METADATA_DISABLED: "true",
  });
  expect(proc.exitCode).not.toBe(0);
  expect(proc.stderr).toMatch(/credential/i);
});
