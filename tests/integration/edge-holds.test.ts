import { expect, test } from "bun:test";
import { bunServeOptions } from "../../src/http/bun-serve.ts";
import { SECURITY_HEADERS } from "../../src/http/middleware/request.ts";
import { createTenantLookup } from "../../src/tenancy/tenant-lookup.ts";
import { useTestApp } from "../helpers/app.ts";
import { activeDomain, createTenant, createUser, loginTokens } from "../helpers/identity.ts";

// the counters in Redis, as in Production (without a cache the database keeps them: docs/cache.md)
const app = useTestApp({
  cache: "edge-holds",
  settings: {
    "Server:MaxBodyBytes": "2048",
    "Tenancy:Resolution:TrustedProxies:0": "10.0.0.0/8",
    // one request back every 72 s: the allowance spent in the test does not refill during it
    "RateLimiting:Global:PermitLimit": "50",
    "RateLimiting:Global:WindowSeconds": "3600",
  },
});

const problemOf = async (response: Response) => {
  expect(response.headers.get("content-type")).toStartWith("application/problem+json");
  return (await response.json()) as { status: number; code: string; requestId: string; detail: string };
};

/** Counts the statements the app sends to the database while `run` runs. */
async function countStatements(run: () => Promise<void>): Promise<number> {
  let statements = 0;
  const database = app.deps.database;
  database.setQueryObserver({
    observe: (_statement, execute) => {
      statements++;
      return execute();
    },
  });
  try {
    await run();
  } finally {
    database.setQueryObserver(undefined);
  }
  return statements;
}

test("a malformed Host or X-Forwarded-Host is a 400 problem, logged as a request line", async () => {
  for (const host of ["a b", "localhost:abc", "localhost:99999", "", "local/host", "x@localhost"]) {
    const response = await app.request("/api/plans", { headers: { host } });
    expect(response.status).toBe(400);
    const problem = await problemOf(response);
    expect(problem.code).toBe("host_not_allowed");
    expect(response.headers.get("x-request-id")).toBe(problem.requestId);
  }
  // a trusted proxy's X-Forwarded-Host is held to the same grammar
  const forwarded = await app.request("/api/plans", { headers: { "x-forwarded-host": "a b" } }, "10.0.0.7");
  expect(forwarded.status).toBe(400);
  expect((await problemOf(forwarded)).code).toBe("host_not_allowed");
  // a request whose URL has no usable host (what bun-serve.ts makes of one without a Host)
  const hostless = await app.request("http://no-host.invalid/api/plans");
  expect(hostless.status).toBe(400);
  expect(app.logs.some((line) => line.includes("unhandled error"))).toBe(false);
  // a port is still fine
  expect((await app.request("/api/plans", { headers: { host: "localhost:8080" } })).status).toBe(200);
});

test("a body over Server:MaxBodyBytes is a 413 problem with request id and headers, either encoding", async () => {
  const big = "x".repeat(4096);
  const sized = await app.request("/api/auth/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: big, password: big }),
  });
  // a stream has no Content-Length: it is counted as it is read
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let i = 0; i < 8; i++) controller.enqueue(new TextEncoder().encode(big));
      controller.close();
    },
  });
  const chunked = await app.request("/api/auth/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: stream,
    duplex: "half",
  } as RequestInit);
  for (const response of [sized, chunked]) {
    expect(response.status).toBe(413);
    const problem = await problemOf(response);
    expect(problem.code).toBe("payload_too_large");
    expect(response.headers.get("x-request-id")).toBe(problem.requestId);
    for (const [name, value] of SECURITY_HEADERS) expect(response.headers.get(name)).toBe(value);
    const line = app.logs.map((l) => JSON.parse(l)).find((l) => l.requestId === problem.requestId);
    expect(line).toMatchObject({ msg: "request", status: 413 });
  }
  expect(app.logs.some((line) => line.includes("unhandled error"))).toBe(false);
});

test("a JSON body nested deeper than 64 levels is a 400 before any handler", async () => {
  const deep = `${"[".repeat(150_000)}${"]".repeat(150_000)}`;
  const response = await app.app.fetch(
    new Request("http://localhost/api/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"email":"a@example.com","password":${deep.slice(0, 1000)}${deep.slice(-1000)}}`,
    }),
    { peerAddress: "127.0.0.2" },
  );
  expect(response.status).toBe(400);
  expect((await problemOf(response)).detail).toContain("nested deeper than 64");
  // depth inside strings does not count
  const flat = await app.request("/api/auth/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: `${"[".repeat(200)}@example.com`, password: "x".repeat(12) }),
  });
  expect(flat.status).not.toBe(400);
});

test("authenticated answers carry Cache-Control: no-store unless the route set its own", async () => {
  const tenant = await createTenant(app.db);
  const user = await createUser(app.db, tenant.id, { role: "owner" });
  const tokens = await loginTokens(app, { email: user.email, tenant: tenant.code });
  const bearer = { headers: { authorization: `Bearer ${tokens.accessToken}`, "x-tenant": tenant.code } };
  const me = await app.request("/api/auth/me", bearer);
  expect(me.status).toBe(200);
  expect(me.headers.get("cache-control")).toBe("no-store");
  const users = await app.request("/api/tenant/users", {
    headers: { authorization: `Bearer ${tokens.accessToken}` },
  });
  expect(users.status).toBe(200);
  expect(users.headers.get("cache-control")).toBe("no-store");
  // a route's own Cache-Control stays: the plan catalog is public
  const plans = await app.request("/api/plans", {
    headers: { authorization: `Bearer ${tokens.accessToken}` },
  });
  expect(plans.headers.get("cache-control")).toStartWith("public");
  // an anonymous answer is left alone
  expect((await app.request("/api/plans")).headers.get("cache-control")).toStartWith("public");
});

test("a client over its global limit costs no database statement, whatever Host or tenant code it sends", async () => {
  const peer = "198.51.100.77";
  const limit = 50;
  // spend the client's whole allowance (with the host and code lookups this costs queries)
  const before = await countStatements(async () => {
    for (let i = 0; i < limit; i++) {
      const response = await app.request(
        "/api/auth/sms/send",
        { headers: { host: `h${crypto.randomUUID().slice(0, 8)}.example`, "x-tenant": "x" } },
        peer,
      );
      expect(response.status).toBe(400);
    }
  });
  expect(before).toBeGreaterThan(0);
  const rejected = 200;
  const after = await countStatements(async () => {
    for (let i = 0; i < rejected; i++) {
      const random = crypto.randomUUID().slice(0, 8);
      const host = i % 2 === 0 ? `h${random}.example` : "localhost";
      const response = await app.request(
        "/api/auth/login",
        {
          method: "POST",
          headers: { host, "x-tenant": `c${random}`, "content-type": "application/json" },
          body: "{}",
        },
        peer,
      );
      expect(response.status).toBe(429);
    }
  });
  // docs/cache.md states this number
  expect(after / rejected).toBe(0);
});

test("unknown hosts and codes are cached negatively; the lookup cache evicts the oldest, not all", async () => {
  const tenant = await createTenant(app.db);
  await activeDomain(app.db, tenant.id, "kept.example");
  const lookup = createTenantLookup(app.deps.database.db, app.deps.clock, 100); // as the app makes it
  expect(await lookup.byDomain("kept.example")).toMatchObject({ id: tenant.id });
  const statements = await countStatements(async () => {
    for (let i = 0; i < 50; i++) {
      expect(await lookup.byDomain(`gone${i}.example`)).toBeNull();
      expect(await lookup.byCode(`nope${i}`)).toBeNull();
      // the legitimate entry stays the most recently used
      expect(await lookup.byDomain("kept.example")).toMatchObject({ id: tenant.id });
    }
    // asked again, the unknown names cost nothing (the last 49 of each kind are still cached)
    for (let i = 1; i < 50; i++) {
      expect(await lookup.byDomain(`gone${i}.example`)).toBeNull();
      expect(await lookup.byCode(`nope${i}`)).toBeNull();
    }
  });
  // 100 misses loaded once each; the flood past the bound evicted only old entries
  expect(statements).toBe(100);
  const kept = await countStatements(async () => {
    expect(await lookup.byDomain("kept.example")).toMatchObject({ id: tenant.id });
  });
  expect(kept).toBe(0);
  // the bound holds: the least recently used entry (the first made-up host) was evicted
  const evicted = await countStatements(async () => {
    expect(await lookup.byDomain("gone0.example")).toBeNull();
  });
  expect(evicted).toBe(1);
});

test("Bun serves no development page: an escaped error is a problem+json 500 without its message", async () => {
  const options = bunServeOptions(app.app, app.deps);
  expect(options.development).toBe(false);
  const response = options.error(new Error("boom at /work/secret/path.ts"));
  expect(response.status).toBe(500);
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  for (const [name, value] of SECURITY_HEADERS) expect(response.headers.get(name)).toBe(value);
  const text = await response.text();
  expect(text).not.toContain("boom");
  expect(JSON.parse(text)).toMatchObject({ status: 500, code: "internal" });
});
