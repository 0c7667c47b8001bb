import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { stopChildrenAfterAll, tracked } from "../helpers/children.ts";
import { collectOutput, ROOT } from "../helpers/process.ts";
import { freePort } from "../helpers/redis-server.ts";

// The README's quickstart as a new user meets it: `npm run dev` in a fresh checkout (the files git
// tracks, as a clone has them: no node_modules, no .cache, no .data), so setup installs the packages
// and makes the embedded database template before the first start, Development on PGlite in
// ./.data/dev.
stopChildrenAfterAll();
const dir = mkdtempSync(join(tmpdir(), "plinth-quickstart-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(() => {
  const copied = Bun.spawnSync(
    ["sh", "-c", `git ls-files -z | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C ${dir}`],
    { cwd: ROOT, stdout: "pipe", stderr: "pipe" },
  );
  if (copied.exitCode !== 0) throw new Error(`copying the checkout failed: ${copied.stderr.toString()}`);
  for (const absent of ["node_modules", ".cache", ".data"]) expect(readdirSync(dir)).not.toContain(absent);
}, 60_000);

/** The pid of the `bun src/server.ts` that `npm run dev` (pid `root`) started, once it runs. */
function serverPid(root: number): number | undefined {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift() ?? 0;
    try {
      const [command, script] = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (command?.endsWith("bun") && script === "src/server.ts") return pid; // not npm's `sh -c`
    } catch {
      continue;
    }
    queue.push(...(children.get(pid) ?? []));
  }
  return undefined;
}

/** `npm run dev` in `dir`; resolves its printed block. */
async function dev(port: number) {
  const proc = tracked(
    Bun.spawn(["npm", "run", "dev"], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: String(port) },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  let wake = () => {};
  const output = collectOutput(proc, () => wake());
  const block = await new Promise<string[]>((resolve, reject) => {
    const check = () => {
      const at = output.lines.findIndex((l) => l.startsWith("Plinth is running"));
      const end = at >= 0 ? output.lines.findIndex((l, i) => i > at && l === "") : -1;
      if (end > at) resolve(output.lines.slice(at, end));
      else if (proc.exitCode !== null)
        reject(new Error(`dev ended: ${output.lines.join("\n")}${output.stderr()}`));
    };
    wake = check;
    void proc.exited.then(() => setTimeout(check, 100));
  });
  const server = serverPid(proc.pid);
  if (!server) throw new Error("npm run dev runs no src/server.ts");
  return {
    proc,
    block,
    /** The JSON log line whose `msg` is `msg`. */
    logged: (msg: string) =>
      output.lines
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((r) => r.msg === msg),
    /** The server's peak resident memory so far (VmHWM), in MB. */
    peakMb: () => Number(/^VmHWM:\s+(\d+)/m.exec(readFileSync(`/proc/${server}/status`, "utf8"))?.[1]) / 1024,
    /** SIGTERM to the server (what Ctrl-C does to the whole group); npm ends with its status. */
    stop: async () => {
      process.kill(server, "SIGTERM");
      return await proc.exited;
    },
  };
}

const field = (block: string[], name: string) =>
  block
    .find((l) => l.trimStart().startsWith(name))
    ?.trimStart()
    .slice(name.length)
    .trim() ?? "";

async function signIn(port: number, origin: string, email: string, password: string): Promise<Response> {
  return fetch(`http://localhost:${port}/console/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: { origin, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ email, password }),
  });
}

test("npm run dev in a fresh checkout: keys kept 0600, one block of URLs and a generated administrator, the console signed in from its origin, a webhook delivered to a local receiver", async () => {
  const port = await freePort();
  const first = await dev(port);
  // setup made the template on this first run; the new embedded database is a copy of it: no initdb
  // and no migration in the API process, which keeps it under the 400 MB (docs/performance.md)
  expect(first.logged("using embedded PGlite: for development only")?.template).toBeString();
  expect(first.logged("database is up to date")?.applied).toEqual([]);
  expect(first.peakMb()).toBeLessThan(400);
  const base = `http://localhost:${port}`;
  expect(field(first.block, "API ")).toBe(`${base}/api`);
  expect(field(first.block, "API docs")).toBe(`${base}/api/docs`);
  expect(field(first.block, "console")).toBe(`${base}/console`);
  const email = field(first.block, "administrator");
  const password = field(first.block, "password").split(/\s+/)[0] ?? "";
  expect(email).toBe("admin@example.com");
  expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/);

  const keysPath = join(dir, ".data/dev/quickstart-keys.json");
  expect(statSync(keysPath).mode & 0o777).toBe(0o600);
  const keys = readFileSync(keysPath, "utf8");
  // the block names the file, never a key
  expect(first.block.join("\n")).not.toContain(JSON.parse(keys).tenantSecretMasterKey);

  // the console accepts its own origin (the generated password must be changed first) ...
  const signedIn = await signIn(port, base, email, password);
  expect(signedIn.status).toBe(303);
  expect(signedIn.headers.get("location")).toBe("/console/password");
  // ... and refuses another, naming the origin and the setting
  const refused = await signIn(port, "http://elsewhere.example:3000", email, password);
  expect(refused.status).toBe(403);
  const detail = await refused.text();
  expect(detail).toContain("http://elsewhere.example:3000");
  expect(detail).toContain("BrowserAuth__AllowedOrigins__0");
  expect(await first.stop()).toBe(0);

  // a second start keeps the keys and the administrator; the password is not shown again
  const second = await dev(port);
  expect(second.logged("using embedded PGlite: for development only")?.template).toBeUndefined();
  expect(second.logged("database is up to date")?.applied).toEqual([]);
  expect(readFileSync(keysPath, "utf8")).toBe(keys);
  expect(field(second.block, "administrator")).toContain("created on an earlier start");
  expect(second.block.join("\n")).not.toContain(password);
  expect((await signIn(port, base, email, password)).status).toBe(303);

  // webhooks reach a local receiver: the administrator makes a tenant and its owner, the owner an
  // endpoint on this machine, and its test event arrives signed with the endpoint's secret
  const received: { headers: Record<string, string>; body: string }[] = [];
  let arrived = () => {};
  const delivered = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (request) => {
      received.push({ headers: Object.fromEntries(request.headers.entries()), body: await request.text() });
      arrived();
      return new Response("ok");
    },
  });
  try {
    const call = async (path: string, body: unknown, token?: string) => {
      const response = await fetch(`${base}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      });
      return { status: response.status, json: (await response.json()) as Record<string, unknown> };
    };
    const temporary = await call("/api/auth/login", { email, password });
    const newPassword = `${password}-Changed`;
    const admin = await call(
      "/api/auth/password",
      { currentPassword: password, newPassword },
      String(temporary.json.accessToken),
    );
    expect(admin.status).toBe(200);
    const adminToken = String(admin.json.accessToken);
    // with its own password the administrator is signed in to the console: its home page, its name
    const consoleSignIn = await signIn(port, base, email, newPassword);
    expect(consoleSignIn.status).toBe(303);
    expect(consoleSignIn.headers.get("location")).toBe("/console");
    const cookie = consoleSignIn.headers
      .getSetCookie()
      .map((c) => c.split(";")[0])
      .join("; ");
    const home = await fetch(`${base}/console`, { headers: { cookie }, redirect: "manual" });
    expect(home.status).toBe(200);
    const page = await home.text();
    expect(page).toContain(`${email} · <span class="badge muted">platform_admin</span>`);
    expect(page).toContain('action="/console/sign-out"');
    const tenant = await call("/api/admin/tenants", { code: "acme", name: "Acme" }, adminToken);
    expect(tenant.status).toBe(201);
    const owner = { email: "owner@acme.test", password: "correct horse battery staple 42" };
    const user = await call(
      `/api/admin/tenants/${tenant.json.id}/users`,
      { ...owner, name: "Acme Owner", role: "owner" },
      adminToken,
    );
    expect(user.status).toBe(201);
    const ownerLogin = await call("/api/auth/login", { ...owner, tenant: "acme" });
    expect(ownerLogin.status).toBe(200);
    // a user an administrator made chooses a password of their own first
    const ownerChanged = await call(
      "/api/auth/password",
      { currentPassword: owner.password, newPassword: `${owner.password} changed` },
      String(ownerLogin.json.accessToken),
    );
    expect(ownerChanged.status).toBe(200);
    const ownerToken = String(ownerChanged.json.accessToken);
    const endpoint = await call(
      "/api/tenant/webhooks",
      { url: `http://127.0.0.1:${receiver.port}/hooks`, events: ["*"] },
      ownerToken,
    );
    expect(endpoint.status).toBe(201);
    const endpointId = (endpoint.json.endpoint as { id: string }).id;
    expect((await call(`/api/tenant/webhooks/${endpointId}/test`, {}, ownerToken)).status).toBe(202);
    await delivered;
    const [delivery] = received;
    const event = new Webhook(String(endpoint.json.secret)).verify(
      delivery?.body ?? "",
      delivery?.headers ?? {},
    );
    expect(event).toMatchObject({ type: "webhook.test" });
  } finally {
    receiver.stop(true);
  }
  expect(await second.stop()).toBe(0);
}, 300_000);
