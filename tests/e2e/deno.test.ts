import { afterAll, beforeAll, expect, test } from "bun:test";
import { type OtlpCollector, startOtlpCollector } from "../fixtures/otlp-collector.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { tracked } from "../helpers/children.ts";
import { denoBinary } from "../helpers/deno.ts";
import { createPlatformAdmin, PASSWORD } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";
import { cleanEnv, ROOT } from "../helpers/process.ts";

/** The same app under Deno (src/deno.ts): health, readiness, a password sign-in, exported spans. */
let collector: OtlpCollector;
afterAll(async () => {
  await collector.stop();
});
const t = useTestDatabase();
beforeAll(async () => {
  collector = startOtlpCollector();
}, 60_000);

test("src/deno.ts serves the API and runs the background loops under Deno", async () => {
  const proc = tracked(
    Bun.spawn([denoBinary(), "run", "-A", "src/deno.ts"], {
      cwd: ROOT,
      env: cleanEnv({
        PLINTH_ENVIRONMENT: "Development",
        DATABASE_URL: t.url,
        PORT: "0",
        OpenTelemetry__OtlpEndpoint: collector.url,
        DENO_NO_UPDATE_CHECK: "1",
      }),
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const lines: string[] = [];
  const stderr = new Response(proc.stderr).text();
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`Deno did not listen in 30 s:\n${lines.join("\n")}`)),
        30_000,
      );
      void (async () => {
        const decoder = new TextDecoder();
        let buffer = "";
        for await (const chunk of proc.stdout) {
          buffer += decoder.decode(chunk, { stream: true });
          let newline = buffer.indexOf("\n");
          while (newline >= 0) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + 1);
            lines.push(line);
            const record = JSON.parse(line) as { msg?: string; port?: number; runtime?: string };
            if (record.msg === "listening" && record.runtime === "deno" && record.port) {
              clearTimeout(timer);
              resolve(record.port);
            }
            newline = buffer.indexOf("\n");
          }
        }
        reject(new Error(`Deno exited before listening:\n${lines.join("\n")}\n${await stderr}`));
      })();
    });
    // the same background loops as under Bun
    await waitFor(() => lines.some((l) => l.includes('"msg":"background loops started"')), {
      what: "the background loops",
    });
    const started = JSON.parse(lines.find((l) => l.includes('"msg":"background loops started"')) ?? "{}");
    expect((started as { running: string[] }).running.sort()).toEqual([
      "jobs",
      "schedules",
      "subscriptions",
      "tenantDomains",
      "usageReconciliation",
    ]);
    const base = `http://127.0.0.1:${port}`;
    const live = await fetch(`${base}/api/health`);
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: "pass" });
    const ready = await fetch(`${base}/api/health/ready`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { status: string; checks: Record<string, unknown> };
    expect(body.status).toBe("pass");
    expect(Object.keys(body.checks)).toContain("database:responseTime");

    // a hash written under Bun (Bun.password) verifies under Deno (hash-wasm)
    const admin = await createPlatformAdmin(t.database.db);
    const login = await fetch(`${base}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: admin.email, password: PASSWORD }),
    });
    expect(login.status).toBe(200);
    const tokens = (await login.json()) as { accessToken: string };
    expect(tokens.accessToken.split(".")).toHaveLength(3);

    // the console's pages and assets (read from node_modules and src by import.meta) under Deno
    const signIn = await fetch(`${base}/console/sign-in`);
    expect(signIn.status).toBe(200);
    const page = await signIn.text();
    const assets = [...page.matchAll(/(?:href|src)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
    // the stylesheet and the scripts (the sign-in page also loads the passkey ceremony's two)
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const asset of assets) expect((await fetch(`${base}${asset}`)).status).toBe(200);
  } finally {
    proc.kill("SIGTERM");
    const code = await proc.exited;
    expect(code).toBe(0);
  }
  // telemetry works under Deno too: the sign-in's server span with its statements, flushed at shutdown
  const server = await collector.waitForSpan((s) => s.name === "POST /api/auth/login");
  expect(collector.spans.some((s) => s.traceId === server.traceId && s.parentSpanId === server.spanId)).toBe(
    true,
  );
}, 60_000);
