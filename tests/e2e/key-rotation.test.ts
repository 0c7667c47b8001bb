import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useTestDatabase } from "../helpers/app.ts";
import { tracked } from "../helpers/children.ts";
import { appRoleEnv } from "../helpers/database.ts";
import { cleanEnv, ROOT } from "../helpers/process.ts";
import { type OwnRedis, ownRedisServer } from "../helpers/redis-server.ts";

/**
 * docs/runbooks/key-rotation.md's JWT section, run as written: its commands are read from the page
 * (the folder `/etc/plinth/keys` replaced by this test's), each followed by a restart of a Production
 * API loaded from production.env, as the runbook says; then the JWKS and the tokens are checked.
 */

const HOST = "api.example.test";
const root = mkdtempSync(join(tmpdir(), "plinth-rotation-"));
const dir = join(root, "keys");
const t = useTestDatabase({ empty: true });
let redis: OwnRedis;
const email = "admin@example.test";
let password = randomBytes(18).toString("base64");

function run(command: string, env: Record<string, string | undefined> = {}) {
  const proc = Bun.spawnSync(["sh", "-c", command], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString() + proc.stderr.toString() };
}

const connections = () => ({ DATABASE_URL: t.url, CACHE_URL: redis.url });
const loaded = (command: string) => `set -a; . ${dir}/production.env; set +a; exec ${command}`;

beforeAll(async () => {
  redis = await ownRedisServer();
  expect(run(`bun run keys:generate --out ${dir} --host ${HOST}`).code).toBe(0);
  const migrate = run(loaded("bun run migrate --bootstrap-platform-admin"), {
    ...connections(),
    PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: email,
    PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: password,
    PLINTH_BOOTSTRAP_PLATFORM_ADMIN_NAME: "First Admin",
  });
  expect(migrate.code).toBe(0);
}, 60_000);
afterAll(async () => {
  await redis.stop();
  rmSync(root, { recursive: true, force: true });
});

/** The JWT section's shell blocks, in order, with this test's key folder. */
function runbookCommands(): string[] {
  const page = readFileSync(join(ROOT, "docs/runbooks/key-rotation.md"), "utf8");
  const start = page.indexOf("## JWT signing key");
  const section = page.slice(start, page.indexOf("\n## ", start + 1));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
    (m[1] ?? "")
      .split("\n")
      .map((line) => line.trim())
      .join("\n")
      .trim()
      .replaceAll("/etc/plinth/keys", dir),
  );
}

/** A Production API from production.env (a "replica restarted with the settings"). */
async function startApi() {
  const proc = tracked(
    Bun.spawn(["sh", "-c", loaded("bun run start")], {
      cwd: ROOT,
      env: cleanEnv({ ...connections(), ...appRoleEnv(t.url), PORT: "0" }),
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const port = await listeningPort(proc.stdout, new Response(proc.stderr).text());
  const call = (path: string, init: RequestInit = {}) =>
    fetch(`http://127.0.0.1:${port}${path}`, {
      ...init,
      headers: { host: HOST, "content-type": "application/json", ...(init.headers ?? {}) },
    });
  const signIn = async () => {
    const response = await call("/api/auth/login", {
      method: "POST",
      body: JSON.stringify({ email, password }),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { accessToken: string }).accessToken;
  };
  return {
    call,
    signIn,
    me: async (token: string) =>
      (await call("/api/auth/me", { headers: { authorization: `Bearer ${token}` } })).status,
    kids: async () =>
      ((await (await call("/.well-known/jwks.json")).json()) as { keys: { kid: string }[] }).keys
        .map((k) => k.kid)
        .sort(),
    stop: async () => {
      proc.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
    },
  };
}

const kidOf = (token: string) =>
  (JSON.parse(Buffer.from(token.split(".")[0] ?? "", "base64url").toString()) as { kid: string }).kid;

test("the JWT rotation runbook as written: publish, switch, retire; old tokens verify until the old key is retired", async () => {
  const commands = runbookCommands();
  expect(commands).toEqual([
    `bun run keys:generate --rotate jwt --out ${dir}`,
    `bun run keys:generate --rotate jwt --switch --out ${dir}`,
    `bun run keys:generate --rotate jwt --retire --out ${dir}`,
  ]);
  const date = new Date().toISOString().slice(0, 10);
  const oldKid = `jwt-${date}`;
  const newKid = `jwt-${date}-2`; // keys:generate made jwt-<date> today

  // before: the first install's key signs; the temporary password is changed once
  let api = await startApi();
  const first = await api.call("/api/auth/login", {
    method: "POST",
    body: JSON.stringify({ email, password }),
  });
  const temporary = (await first.json()) as { accessToken: string };
  const newPassword = randomBytes(18).toString("base64");
  const changed = await api.call("/api/auth/password", {
    method: "POST",
    headers: { authorization: `Bearer ${temporary.accessToken}` },
    body: JSON.stringify({ currentPassword: password, newPassword }),
  });
  expect(changed.status).toBe(200);
  password = newPassword;
  const oldToken = await api.signIn();
  expect(kidOf(oldToken)).toBe(oldKid);
  await api.stop();

  // 1. publish: the new public key verifies, the old key still signs
  const publish = run(commands[0] ?? "");
  expect(publish.code).toBe(0);
  expect(publish.out).toContain(`+ Security__Jwt__VerificationKeys__0__KeyId=${newKid}`);
  expect(publish.out).not.toContain("PRIVATE KEY");
  for (const suffix of ["key.pem", "pub.pem"])
    expect(statSync(join(dir, `${newKid}.${suffix}`)).mode & 0o777).toBe(0o600);
  expect(statSync(join(dir, "production.env")).mode & 0o777).toBe(0o600);
  // a second publish while this rotation is unfinished changes nothing
  expect(run(commands[0] ?? "").code).toBe(1);
  api = await startApi();
  expect(await api.kids()).toEqual([oldKid, newKid].sort());
  expect(kidOf(await api.signIn())).toBe(oldKid);
  expect(await api.me(oldToken)).toBe(200);
  await api.stop();

  // 2. switch: new tokens carry the new kid; tokens signed before still verify
  const switched = run(commands[1] ?? "");
  expect(switched.code).toBe(0);
  expect(switched.out).toContain(`+ Security__Jwt__CurrentKeyId=${newKid}`);
  api = await startApi();
  const newToken = await api.signIn();
  expect(kidOf(newToken)).toBe(newKid);
  expect(await api.me(newToken)).toBe(200);
  expect(await api.me(oldToken)).toBe(200);
  expect(await api.kids()).toEqual([oldKid, newKid].sort());
  await api.stop();

  // 3. retire: only the new key is left; the old one's tokens no longer verify
  const retired = run(commands[2] ?? "");
  expect(retired.code).toBe(0);
  expect(retired.out).toContain(`${dir}/${oldKid}.key.pem`);
  api = await startApi();
  expect(await api.kids()).toEqual([newKid]);
  expect(await api.me(newToken)).toBe(200);
  expect(await api.me(oldToken)).toBe(401);
  await api.stop();
  // out of order: nothing to switch to or retire now
  expect(run(commands[1] ?? "").code).toBe(1);
  expect(run(commands[2] ?? "").code).toBe(1);
}, 180_000);

async function listeningPort(stdout: ReadableStream<Uint8Array>, stderr: Promise<string>): Promise<number> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of stdout) {
    buffer += decoder.decode(chunk, { stream: true });
    for (const line of buffer.split("\n")) {
      if (!line.includes('"msg":"listening"')) continue;
      const port = (JSON.parse(line) as { port?: number }).port;
      if (port) return port;
    }
  }
  throw new Error(`the API did not start:\n${buffer}${await stderr}`);
}
