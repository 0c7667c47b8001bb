import { afterAll, beforeAll, expect, test } from "bun:test";
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { tracked } from "../helpers/children.ts";
import { SERVER_URL } from "../helpers/database.ts";
import { cleanEnv, collectOutput, ROOT } from "../helpers/process.ts";
import { freePort, type OwnRedis, ownRedisServer } from "../helpers/redis-server.ts";

/**
 * docs/runbooks/first-install.md run as written: every ```sh block of the page, in order, by the
 * shell, with only what the page lets an operator choose made this test's own (the key folder, the
 * database and role names, the ports, the Redis server) and the values it says to paste filled in.
 * The API runs behind deploy/caddy/Caddyfile, and `curl https://api.example.com/…` reaches it through
 * Caddy: a `curl` on PATH that adds `--connect-to` (the name → Caddy's port) and Caddy's root
 * certificate, the two things a machine with DNS and a trusted CA would not need.
 */

const suffix = crypto.randomUUID().slice(0, 8);
const role = `plinth_fi_${suffix}`;
const database = `plinth_fi_${suffix}`;
const root = mkdtempSync(join(tmpdir(), "plinth-first-install-"));
const keys = join(root, "keys");
const caddyHome = join(root, "caddy");
const shims = join(root, "bin");
let redis: OwnRedis;
let apiPort = 0;
let httpsPort = 0;
const caddyEnv: Record<string, string> = {};
const rootCa = join(caddyHome, "data/caddy/pki/authorities/local/root.crt");

/** The page's command blocks, in order, with the test's own names in place of the page's. */
function blocks(): string[] {
  const page = readFileSync(join(ROOT, "docs/runbooks/first-install.md"), "utf8");
  return [...page.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
    (m[1] ?? "")
      .trim()
      .replaceAll("/etc/plinth/keys", keys)
      .replaceAll("/var/backups/plinth.dump", join(root, "plinth.dump"))
      .replaceAll("create role plinth ", `create role ${role} `)
      .replaceAll("create database plinth owner plinth", `create database ${database} owner ${role}`)
      .replaceAll(
        "postgres://plinth:choose-a-password@127.0.0.1:5432/plinth",
        `postgres://${role}:choose-a-password@127.0.0.1:5432/${database}`,
      )
      // the API's role, which the migrator creates or (here: the test server's, cluster-wide) checks
      .replaceAll(
        "postgres://plinth_app:choose-an-app-password@127.0.0.1:5432/plinth",
        `postgres://plinth_app:choose-an-app-password@127.0.0.1:5432/${database}`,
      )
      .replaceAll("redis://127.0.0.1:6379", redis.url)
      .replaceAll("127.0.0.1:8080", `127.0.0.1:${apiPort}`),
  );
}

/** The environment the runbook's shell has: what the earlier blocks exported, plus the test's ports. */
let exported = "";
const shellEnv = () =>
  cleanEnv({ PATH: `${shims}:${process.env.PATH ?? ""}`, PORT: String(apiPort), ...caddyEnv });

/** Runs a block to its end; stderr goes to a file, as to a terminal (`tee /dev/stderr` cannot open a socket). */
function sh(block: string) {
  const errors = join(root, "stderr");
  writeFileSync(errors, "");
  const fd = openSync(errors, "a"); // appended to, so a second opener's writes are not overwritten
  try {
    const proc = Bun.spawnSync(["bash", "-c", `${exported}\n${block}`], {
      cwd: ROOT,
      env: shellEnv(),
      stdout: "pipe",
      stderr: fd,
    });
    return { code: proc.exitCode, stdout: proc.stdout.toString(), stderr: readFileSync(errors, "utf8") };
  } finally {
    closeSync(fd);
  }
}

function background(block: string) {
  const proc = tracked(
    // exec, so stopping the shell stops the command (`env` for a block that starts with VAR=value)
    Bun.spawn(["bash", "-c", `${exported}\nexec ${/^\w+=/.test(block) ? "env " : ""}${block}`], {
      cwd: ROOT,
      env: shellEnv(),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  return { proc, output: collectOutput(proc, () => {}) };
}

beforeAll(async () => {
  redis = await ownRedisServer();
  apiPort = await freePort();
  httpsPort = await freePort();
  Object.assign(caddyEnv, {
    XDG_DATA_HOME: join(caddyHome, "data"),
    XDG_CONFIG_HOME: join(caddyHome, "config"),
    CADDY_HTTP_PORT: String(await freePort()),
    CADDY_HTTPS_PORT: String(httpsPort),
    CADDY_ADMIN: `127.0.0.1:${await freePort()}`,
  });
  mkdirSync(shims, { recursive: true });
  writeFileSync(
    join(shims, "curl"),
    `#!/bin/sh\nexec /usr/bin/curl --connect-to api.example.com:443:127.0.0.1:${httpsPort} --cacert ${rootCa} "$@"\n`,
  );
  chmodSync(join(shims, "curl"), 0o755);
}, 30_000);

afterAll(async () => {
  await redis?.stop();
  const admin = postgres(SERVER_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${database} with (force)`);
  await admin.unsafe(`drop role if exists ${role}`);
  await admin.end();
  rmSync(root, { recursive: true, force: true });
});

test("first-install.md as written: role and database, keys, environment, migrator and administrator, Caddy in front, ready over HTTPS, sign-in and password change", async () => {
  const [
    machine,
    createDb,
    checkDb,
    generate,
    environment,
    migrate,
    caddy,
    start,
    ready,
    login,
    password,
    me,
    backup,
    ...rest
  ] = blocks();
  expect(rest).toEqual([]);
  // 1. the machine: the suite's setup (scripts/setup.sh) installed what this block installs
  expect(machine).toContain("sh scripts/setup.sh");
  const created = sh(createDb ?? "");
  expect(created.stderr).toBe("");
  expect(sh(checkDb ?? "").stdout.trim()).toBe("1");

  // 2. keys and Production settings
  const keysMade = sh(generate ?? "");
  expect(keysMade.code).toBe(0);

  // 3. the environment: every later block runs in a shell that ran this one
  exported = environment ?? "";
  expect(sh("echo $PLINTH_ENVIRONMENT").stdout.trim()).toBe("Production");

  // 4. schema and the first administrator; the generated password is printed (tee /dev/stderr)
  const migrated = sh(migrate ?? "");
  expect(migrated.code).toBe(0);
  for (const line of ["migrations applied", "catalog seeded", "platform administrator created"])
    expect(migrated.stdout).toContain(line);
  expect(migrated.stdout).toMatch(/"msg":"API role (created|checked) and granted".*"role":"plinth_app"/);
  const temporary = migrated.stderr.trim().split("\n")[0] ?? "";
  expect(temporary).toMatch(/^[A-Za-z0-9+/]{24}$/);

  // 5. Caddy in front (its export joins the environment), then the API
  const caddyLines = (caddy ?? "").split("\n");
  exported += `\n${caddyLines.filter((l) => l.startsWith("export ")).join("\n")}`;
  const proxy = background(caddyLines.filter((l) => !l.startsWith("export ")).join("\n"));
  const api = background(start ?? "");
  try {
    const deadline = Date.now() + 60_000;
    let answer = sh(ready ?? "");
    while (answer.stdout.trim() !== "200" && Date.now() < deadline) {
      if (api.proc.exitCode !== null)
        throw new Error(`the API ended:\n${api.output.lines.join("\n")}${api.output.stderr()}`);
      if (proxy.proc.exitCode !== null) throw new Error(`caddy ended:\n${proxy.output.stderr()}`);
      await Bun.sleep(250);
      if (existsSync(rootCa)) answer = sh(ready ?? "");
    }
    expect(answer.stdout.trim()).toBe("200");
    const listening = api.output.lines.find((l) => l.includes('"msg":"listening"')) ?? "";
    expect(JSON.parse(listening)).toMatchObject({ environment: "Production" });
    // the API connects as the role row-level security holds, not as the migrator's (the owner)
    expect(sh('psql "$DATABASE_URL" -tAc "select current_user"').stdout.trim()).toBe("plinth_app");
    expect(api.output.lines.some((l) => l.includes("connect as Database:AppRole"))).toBe(false);

    // 6. sign in with the temporary password, change it, and the new token is the administrator
    const first = JSON.parse(sh((login ?? "").replace("<the temporary password>", temporary)).stdout) as {
      accessToken: string;
      refreshToken: string;
      passwordChangeRequired: boolean;
    };
    expect(first.refreshToken).toBeString();
    expect(first.passwordChangeRequired).toBe(true);
    const chosen = `${crypto.randomUUID()}-Aa1`;
    const changed = JSON.parse(
      sh(
        (password ?? "")
          .replace("<accessToken>", first.accessToken)
          .replace("<the temporary password>", temporary)
          .replace("<a new strong password>", chosen),
      ).stdout,
    ) as { accessToken: string };
    expect(changed.accessToken).toBeString();
    const who = JSON.parse(sh((me ?? "").replace("<new accessToken>", changed.accessToken)).stdout) as {
      user: { email: string };
    };
    expect(who.user.email).toBe("admin@example.com");

    // beyond the page ("Next: create a tenant"): a tenant, its owner, and a read in its context
    const admin = `-H 'content-type: application/json' -H "authorization: Bearer ${changed.accessToken}"`;
    const tenant = JSON.parse(
      sh(`curl -s https://api.example.com/api/admin/tenants ${admin} -d '{"code":"acme","name":"Acme"}'`)
        .stdout,
    ) as { id: string };
    expect(tenant.id).toBeString();
    const ownerPassword = `${crypto.randomUUID()}-Bb2`;
    const owner = { email: "owner@acme.example", name: "Acme Owner", password: ownerPassword, role: "owner" };
    const added = sh(
      `curl -s -o /dev/null -w '%{http_code}' https://api.example.com/api/admin/tenants/${tenant.id}/users ${admin} -d '${JSON.stringify(owner)}'`,
    );
    expect(added.stdout).toBe("201");
    const signedIn = JSON.parse(
      sh(
        `curl -s https://api.example.com/api/auth/login -H 'content-type: application/json' -d '${JSON.stringify({ email: owner.email, password: ownerPassword, tenant: "acme" })}'`,
      ).stdout,
    ) as { accessToken: string };
    // a password an administrator set is changed first
    const ownerChanged = JSON.parse(
      sh(
        `curl -s https://api.example.com/api/auth/password -H 'content-type: application/json' -H "authorization: Bearer ${signedIn.accessToken}" -d '${JSON.stringify({ currentPassword: ownerPassword, newPassword: `${crypto.randomUUID()}-Cc3` })}'`,
      ).stdout,
    ) as { accessToken: string };
    const users = JSON.parse(
      sh(
        `curl -s https://api.example.com/api/tenant/users -H "authorization: Bearer ${ownerChanged.accessToken}"`,
      ).stdout,
    ) as { items: { email: string }[] };
    expect(users.items.map((u) => u.email)).toEqual([owner.email]);
    // Backups: on the platform path the owner's dump holds the tenant's rows; without it pg_dump
    // refuses (FORCE holds the owner) rather than write a backup without them
    const backedUp = sh(backup ?? "");
    expect(backedUp.stdout.trim()).toBe("backup readable");
    const rows = sh(`pg_restore --data-only --table=users --file=- ${join(root, "plinth.dump")}`);
    expect(rows.stdout).toContain(owner.email);
    const plain = sh(
      `set -e\n${(backup ?? "")
        .replace("PGOPTIONS='-c plinth.platform=on' ", "")
        .replace(" --enable-row-security", "")
        .replaceAll("plinth.dump", "plain.dump")}`,
    );
    expect(plain.code).not.toBe(0);
    expect(plain.stderr).toContain("row-level security");

    // the log never held the passwords
    const logged = api.output.lines.join("\n") + migrated.stdout;
    expect(logged).not.toContain(temporary);
    expect(logged).not.toContain(chosen);
  } finally {
    for (const child of [api.proc, proxy.proc]) child.kill("SIGTERM");
    await Promise.all([api.proc.exited, proxy.proc.exited]);
  }
}, 240_000);
