import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { stopChildrenAfterAll, tracked } from "../helpers/children.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { waitFor } from "../helpers/jobs.ts";
import { cleanEnv, ROOT, runEntry } from "../helpers/process.ts";
import { fakePem, validProductionEnv } from "../helpers/production-env.ts";

stopChildrenAfterAll();

interface Served {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  port: number;
  lines: string[];
}

/** Starts `bun src/server.ts` and waits for its "listening" line. */
async function serve(env: Record<string, string | undefined>, args: string[] = []): Promise<Served> {
  const proc = tracked(
    Bun.spawn(["bun", "src/server.ts", ...args], {
      cwd: ROOT,
      env: cleanEnv({ PORT: "0", ...env }),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const lines: string[] = [];
  const reader = proc.stdout.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${lines.join("\n")}`)), 20_000);
    (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value);
        let newline = buffer.indexOf("\n");
        while (newline >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          lines.push(line);
          if (line.includes('"msg":"listening"')) {
            clearTimeout(timer);
            resolve(JSON.parse(line).port as number);
          }
          newline = buffer.indexOf("\n");
        }
      }
    })();
  });
  return { proc, port, lines };
}

describe("the API process", () => {
  let t: TestDatabase;
  let served: Served;
  beforeAll(async () => {
    t = await createTestDatabase();
    served = await serve({ DATABASE_URL: t.url, Server__MaxBodyBytes: "1024" });
  });
  afterAll(async () => {
    served.proc.kill("SIGKILL");
    await t.drop();
  });

  const url = (path: string) => `http://127.0.0.1:${served.port}${path}`;

  test("liveness and readiness answer over HTTP", async () => {
    expect((await fetch(url("/api/health"))).status).toBe(200);
    const ready = await fetch(url("/api/health/ready"));
    expect(ready.status).toBe(200);
    expect(ready.headers.get("content-type")).toStartWith("application/health+json");
  });

  test("errors are problem JSON with a stable code and request id, never a stack", async () => {
    const response = await fetch(url("/no/such/route"), { headers: { "x-request-id": "req-123" } });
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toStartWith("application/problem+json");
    // the peer is not a trusted proxy: its X-Request-Id is not taken, the server makes its own
    const requestId = response.headers.get("x-request-id");
    expect(requestId).not.toBe("req-123");
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      status: 404,
      code: "not_found",
      requestId,
      instance: "/no/such/route",
    });
    expect(JSON.stringify(body)).not.toContain("at ");
  });

  test("a body over Server:MaxBodyBytes gets 413 problem JSON", async () => {
    const response = await fetch(url("/api/health"), { method: "POST", body: "x".repeat(4096) });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { code: string }).code).toBe("payload_too_large");
  });

  test("one structured log line per request, without the query string", async () => {
    const response = await fetch(url("/api/plans?token=abc123secret"), {
      headers: { "x-request-id": "log-check-1" },
    });
    expect(response.status).toBe(200);
    // the peer is not a trusted proxy: the line carries the server's id, the client's kept apart
    const requestId = response.headers.get("x-request-id");
    expect(requestId).not.toBe("log-check-1");
    const line = await waitFor(
      async () => served.lines.map((l) => JSON.parse(l)).find((l) => l.requestId === requestId) ?? null,
    );
    expect(line).toMatchObject({
      clientRequestId: "log-check-1",
      level: "info",
      msg: "request",
      method: "GET",
      path: "/api/plans",
      status: 200,
    });
    expect(typeof line.durationMs).toBe("number");
    expect(served.lines.join("\n")).not.toContain("abc123secret");
  });

  test("a passing probe's line is written at debug only: none at the default level", async () => {
    const probes = [await fetch(url("/api/health")), await fetch(url("/api/health/ready"))];
    const ids = probes.map((probe) => {
      expect(probe.status).toBe(200);
      return probe.headers.get("x-request-id");
    });
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    // a request after them, whose line is written: the probes' would have come before it
    const after = (await fetch(url("/no/such/route"))).headers.get("x-request-id");
    await waitFor(async () => served.lines.some((l) => l.includes(`"requestId":"${after}"`)) || null);
    for (const id of ids) expect(served.lines.join("\n")).not.toContain(id as string);
  });

  test("SIGTERM drains and exits 0", async () => {
    served.proc.kill("SIGTERM");
    expect(await served.proc.exited).toBe(0);
    expect(served.lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
  });
});

describe("a failed Production start", () => {
  test("exits 1, names every failing key, and prints no secret value", async () => {
    const secrets = {
      PLINTH_TENANT_SECRET_MASTER_KEY: "this-master-key-is-secret-but-not-32-bytes",
      PLINTH_SMS_CODE_PEPPER: "pepper-too-short-secret",
      PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: "wrong-cert-password-value",
      Security__Jwt__PrivateKey: fakePem("bm90LWEta2V5LWJ1dC1zZWNyZXQtYW55d2F5"),
      TenantDomains__GatewayApiKey: "gateway-api-key-secret-value",
    };
    const env = validProductionEnv(secrets);
    const run = await runEntry("src/server.ts", [], env);
    expect(run.exitCode).toBe(1);
    const output = run.stdout + run.stderr;
    for (const key of [
      "Security:TenantSecrets:MasterKey",
      "Authentication:Sms:CodePepper",
      "Security:DataProtection:CertificatePath",
      "Security:Jwt:PrivateKey",
    ]) {
      expect(output).toContain(key);
    }
    const all = [
      ...Object.values(secrets),
      "bm90LWEta2V5LWJ1dC1zZWNyZXQtYW55d2F5",
      "db-password-123",
      "cache-password-456",
    ];
    for (const secret of all) expect(output).not.toContain(secret);
  });
});
