import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useTestDatabase } from "../helpers/app.ts";
import { tracked } from "../helpers/children.ts";
import { appRoleEnv } from "../helpers/database.ts";
import { cleanEnv, ROOT } from "../helpers/process.ts";
import { type OwnRedis, ownRedisServer } from "../helpers/redis-server.ts";

/**
 * docs/runbooks/first-install.md, run as written: `bun run keys:generate`, load production.env,
 * add DATABASE_URL and CACHE_URL, `bun run migrate --bootstrap-platform-admin`, `bun run start`:
 * a ready Production API where the administrator signs in (password change first).
 */

const HOST = "api.example.test";
const dir = join(mkdtempSync(join(tmpdir(), "plinth-keys-")), "keys");
const t = useTestDatabase({ empty: true });
let redis: OwnRedis;
beforeAll(async () => {
  redis = await ownRedisServer();
}, 30_000);
afterAll(async () => {
  await redis.stop();
  rmSync(join(dir, ".."), { recursive: true, force: true });
});

function run(command: string, env: Record<string, string | undefined> = {}) {
  const proc = Bun.spawnSync(["sh", "-c", command], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString() + proc.stderr.toString() };
}

/** The runbook's shell prefix: production.env loaded into the environment. */
const loaded = (command: string) => `set -a; . ${dir}/production.env; set +a; exec ${command}`;

describe("bun run keys:generate", () => {
  test("--help, and bad usage exits 64", () => {
    const help = run("bun run keys:generate --help");
    expect(help.code).toBe(0);
    expect(help.out).toContain("Exit codes");
    expect(run("bun run keys:generate --out /tmp/x").code).toBe(64);
    expect(run("bun run keys:generate --out /tmp/x --host https://a.example").code).toBe(64);
  });

  test("--rotate names the keys it knows; a folder without production.env changes nothing", () => {
    const unknown = run(`bun run keys:generate --rotate session-cookies --out ${dir}`);
    expect(unknown.code).toBe(64);
    expect(unknown.out).toContain(
      "--rotate takes one of: jwt, tenant-secrets, data-protection, sms-code-pepper, audit-checkpoint",
    );
    expect(run(`bun run keys:generate --rotate sms-code-pepper --switch --out ${dir}`).code).toBe(64);
    for (const name of ["jwt", "tenant-secrets", "data-protection", "sms-code-pepper", "audit-checkpoint"]) {
      const missing = run(`bun run keys:generate --rotate ${name} --out ${dir}-missing`);
      expect(missing.code).toBe(1);
      expect(missing.out).toContain(`${dir}-missing/production.env does not exist (run keys:generate first)`);
      expect(existsSync(`${dir}-missing`)).toBe(false);
    }
  });

  test("writes every key mode 0600 and production.env with secrets only by _FILE reference; never overwrites", () => {
    const first = run(`bun run keys:generate --out ${dir} --host ${HOST}`);
    expect(first.code).toBe(0);
    const names = readdirSync(dir).sort();
    const date = new Date().toISOString().slice(0, 10);
    expect(names).toEqual(
      [
        `audit-checkpoint-${date}.key.pem`,
        `audit-checkpoint-${date}.pub.pem`,
        "data-protection.password",
        "data-protection.pfx",
        `jwt-${date}.key.pem`,
        `jwt-${date}.pub.pem`,
        "production.env",
        "sms-code-pepper",
        `tenant-secrets-${date}.key`,
      ].sort(),
    );
    for (const name of names) expect(statSync(join(dir, name)).mode & 0o777).toBe(0o600);
    const env = readFileSync(join(dir, "production.env"), "utf8");
    expect(env).toContain("PLINTH_ENVIRONMENT=Production");
    expect(env).toContain(`PLINTH_TENANT_SECRET_MASTER_KEY_FILE=${dir}/tenant-secrets-${date}.key`);
    expect(env).toContain(`Security__Jwt__CurrentKeyId=jwt-${date}`);
    expect(env).toContain(`Audit__Checkpoints__SigningKey_FILE=${dir}/audit-checkpoint-${date}.key.pem`);
    expect(readFileSync(join(dir, `audit-checkpoint-${date}.key.pem`), "utf8")).toContain("PRIVATE KEY");
    expect(readFileSync(join(dir, `jwt-${date}.key.pem`), "utf8")).toContain("PRIVATE KEY");
    expect(
      Buffer.from(readFileSync(join(dir, `tenant-secrets-${date}.key`), "utf8").trim(), "base64"),
    ).toHaveLength(32);
    for (const secret of ["data-protection.password", "sms-code-pepper", `tenant-secrets-${date}.key`])
      expect(env).not.toContain(readFileSync(join(dir, secret), "utf8").trim());
    expect(env).not.toMatch(/^(DATABASE_URL|CACHE_URL)/m);

    const before = readFileSync(join(dir, "sms-code-pepper"), "utf8");
    const again = run(`bun run keys:generate --out ${dir} --host ${HOST}`);
    expect(again.code).toBe(1);
    expect(again.out).toContain("Refusing to overwrite");
    expect(readFileSync(join(dir, "sms-code-pepper"), "utf8")).toBe(before);
  });

  test("with DATABASE_URL and CACHE_URL: migrate --bootstrap-platform-admin, start, ready, the admin signs in", async () => {
    const connections = { DATABASE_URL: t.url, CACHE_URL: redis.url };
    const password = randomBytes(18).toString("base64");
    const migrate = run(loaded("bun run migrate --bootstrap-platform-admin"), {
      ...connections,
      PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: "admin@example.test",
      PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: password,
      PLINTH_BOOTSTRAP_PLATFORM_ADMIN_NAME: "First Admin",
    });
    expect(migrate.code).toBe(0);
    expect(migrate.out).toContain("platform administrator created");

    const server = tracked(
      Bun.spawn(["sh", "-c", loaded("bun run start")], {
        cwd: ROOT,
        // the API as its role, which the migrator made and granted (Production refuses the owner)
        env: cleanEnv({ ...connections, ...appRoleEnv(t.url), PORT: "0" }),
        stdout: "pipe",
        stderr: "pipe",
      }),
    );
    try {
      const port = await listeningPort(server.stdout);
      const call = (path: string, init: RequestInit = {}) =>
        fetch(`http://127.0.0.1:${port}${path}`, {
          ...init,
          headers: { host: HOST, "content-type": "application/json", ...(init.headers ?? {}) },
        });
      expect((await call("/api/health/ready")).status).toBe(200);
      // a single-page app on the browser origin: the credentialed sign-in and the CSRF header pass CORS
      const origin = `https://${HOST}`;
      const preflight = await call("/api/auth/login", {
        method: "OPTIONS",
        headers: {
          origin,
          "access-control-request-method": "POST",
          "access-control-request-headers": "content-type,x-csrf-token",
        },
      });
      expect(preflight.status).toBeLessThan(300);
      expect(preflight.headers.get("access-control-allow-origin")).toBe(origin);
      expect(preflight.headers.get("access-control-allow-credentials")).toBe("true");
      expect(preflight.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("x-csrf-token");
      const login = await call("/api/auth/login", {
        method: "POST",
        body: JSON.stringify({ email: "admin@example.test", password }),
      });
      expect(login.status).toBe(200);
      const tokens = (await login.json()) as { accessToken: string; passwordChangeRequired: boolean };
      expect(tokens.passwordChangeRequired).toBe(true);
      const bearer = { authorization: `Bearer ${tokens.accessToken}` };
      expect((await call("/api/auth/me", { headers: bearer })).status).toBe(403);
      const changed = await call("/api/auth/password", {
        method: "POST",
        headers: bearer,
        body: JSON.stringify({ currentPassword: password, newPassword: randomBytes(18).toString("base64") }),
      });
      expect(changed.status).toBe(200);
      const fresh = (await changed.json()) as { accessToken: string };
      expect(
        (await call("/api/auth/me", { headers: { authorization: `Bearer ${fresh.accessToken}` } })).status,
      ).toBe(200);
    } finally {
      server.kill("SIGTERM");
      await server.exited;
    }
  }, 60_000);

  test("a different master key under the generated key id: Production refuses to start, naming the key id only", () => {
    const date = new Date().toISOString().slice(0, 10);
    const other = randomBytes(32).toString("base64");
    const otherPath = join(dir, "..", "other.key");
    writeFileSync(otherPath, `${other}\n`, { mode: 0o600 });
    const start = run(
      `set -a; . ${dir}/production.env; set +a; PLINTH_TENANT_SECRET_MASTER_KEY_FILE=${otherPath} exec bun run start`,
      { ...appRoleEnv(t.url), CACHE_URL: redis.url, PORT: "0" },
    );
    expect(start.code).toBe(1);
    expect(start.out).toContain(`ts-${date}`);
    expect(start.out).toContain("restore the original key");
    expect(start.out).not.toContain(other);
  }, 30_000);
});

async function listeningPort(stdout: ReadableStream<Uint8Array>): Promise<number> {
  const decoder = new TextDecoder();
  let buffer = "";
  const deadline = Date.now() + 20_000;
  for await (const chunk of stdout) {
    buffer += decoder.decode(chunk, { stream: true });
    for (const line of buffer.split("\n")) {
      if (!line.includes('"msg":"listening"')) continue;
      const port = (JSON.parse(line) as { port?: number }).port;
      if (port) return port;
    }
    if (Date.now() > deadline) break;
  }
  throw new Error(`the API did not start:\n${buffer}`);
}
