import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemCtx } from "../../src/context.ts";
import type { Deps } from "../../src/deps.ts";
import { emitEvent } from "../../src/events/outbox.ts";
import { enqueueContext } from "../../src/jobs/enqueue.ts";
import { createWebhookEndpoint } from "../../src/webhooks/create-webhook-endpoint.ts";
import { settingsEnv, testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";
import { tracked } from "../helpers/children.ts";
import { createTenant, newMasterKey } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";
import { ROOT } from "../helpers/process.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";
import { freePort } from "../helpers/redis-server.ts";

// Debian's real Prometheus (scripts/setup.sh) scrapes a running Plinth under a short workload; every
// panel of deploy/grafana/*.json must return series there and every rule of
// deploy/prometheus/alerts.yml must evaluate, naming only metrics the server has.

const GRAFANA = join(ROOT, "deploy/grafana");
const ALERTS = join(ROOT, "deploy/prometheus/alerts.yml");
const dir = mkdtempSync(join(tmpdir(), "plinth-prometheus-"));
const masterKey = newMasterKey();
const cachePrefix = uniquePrefix("prometheus").slice(0, -1);
const settings = {
  "Security:TenantSecrets:KeyId": "prom-e2e",
  "Security:TenantSecrets:MasterKey": masterKey,
  "Webhooks:AllowPrivateDestinations": "true",
  "Webhooks:TimeoutSeconds": "2",
  // every statement counts as slow: the slow-statement panel has data without waiting for a slow one
  "Database:SlowQueryMilliseconds": "1",
};

const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  development: false,
  fetch: () => new Response("ok"),
});
const t = useTestDatabase();
let deps: Deps;
let api: Child;
let apiPort = 0;
let promUrl = "";
const redis = rawRedis();

afterAll(async () => {
  receiver.stop(true);
  await deps?.cache?.close();
  await redis.cleanup(`${cachePrefix}:`);
  redis.close();
  rmSync(dir, { recursive: true, force: true });
});

interface PromAnswer<T> {
  status: "success" | "error";
  error?: string;
  data: T;
}
async function prom<T>(path: string, params: Record<string, string> = {}): Promise<PromAnswer<T>> {
  const url = new URL(path, promUrl);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return (await (await fetch(url)).json()) as PromAnswer<T>;
}
const instant = (query: string) => prom<{ result: unknown[] }>("/api/v1/query", { query });

beforeAll(async () => {
  deps = await testDeps(testConfig({ settings }), { database: t.database, waitForCache: false });
  const metricsPort = await freePort();
  api = spawnBun([join(ROOT, "src/server.ts")], {
    DATABASE_URL: t.url,
    CACHE_URL: REDIS_URL,
    PORT: "0",
    Logging__Level: "info",
    BackgroundProcessing__JobPollSeconds: "1",
    ...settingsEnv({
      ...settings,
      "Cache:KeyPrefix": cachePrefix,
      "OpenTelemetry:Prometheus:Port": String(metricsPort),
      // a retry of the failing endpoint's delivery while the test runs
      "Webhooks:RetrySeconds:0": "1",
    }),
  });
  const listening = await api.waitForLine((l) => l.includes('"msg":"listening"'), 30_000);
  apiPort = JSON.parse(listening).port;

  const promPort = await freePort();
  const config = join(dir, "prometheus.yml");
  writeFileSync(
    config,
    [
      "global:",
      "  scrape_interval: 1s",
      "  evaluation_interval: 1s",
      "rule_files:",
      `  - ${ALERTS}`,
      "scrape_configs:",
      "  - job_name: plinth",
      "    static_configs:",
      `      - targets: ["127.0.0.1:${metricsPort}"]`,
      "",
    ].join("\n"),
  );
  tracked(
    Bun.spawn(
      [
        "prometheus",
        `--config.file=${config}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
      ],
      { stdout: "ignore", stderr: "ignore", stdin: "ignore" },
    ),
  );
  promUrl = `http://127.0.0.1:${promPort}`;
  await waitFor(async () => (await fetch(`${promUrl}/-/ready`).catch(() => null))?.ok, {
    timeoutMs: 20_000,
    intervalMs: 200,
    what: "Prometheus to be ready",
  });
}, 60_000);

/** The short workload: requests of every kind of answer, webhook deliveries that succeed and fail. */
async function workload(): Promise<void> {
  const base = `http://127.0.0.1:${apiPort}`;
  for (let i = 0; i < 5; i++) {
    await fetch(`${base}/api/health`);
    await fetch(`${base}/api/health/ready`);
    await fetch(`${base}/api/no-such-route`);
    await fetch(`${base}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "nobody@example.com", password: "not-the-password-1" }),
    });
  }
  const tenant = await createTenant(t.database.db);
  const ctx = systemCtx("e2e", tenant.id);
  const good = await createWebhookEndpoint(deps, ctx, {
    url: `http://127.0.0.1:${receiver.port}/hook`,
    events: ["*"],
  });
  await createWebhookEndpoint(deps, ctx, { url: "http://127.0.0.1:1/closed", events: ["*"] });
  await t.database.db.transaction((tx) =>
    emitEvent(tx, enqueueContext(deps), {
      tenantId: tenant.id,
      type: "webhook.test",
      data: { endpointId: good.endpoint.id, message: "prometheus e2e" },
    }),
  );
  await t.database.db.transaction((tx) =>
    emitEvent(tx, enqueueContext(deps), {
      tenantId: tenant.id,
      type: "user.deleted",
      data: { userId: "u1" },
    }),
  );
}

interface Panel {
  title: string;
  targets?: { expr: string }[];
}
const dashboards = readdirSync(GRAFANA)
  .filter((name) => name.endsWith(".json"))
  .map((name) => ({
    name,
    panels: (JSON.parse(readFileSync(join(GRAFANA, name), "utf8")) as { panels: Panel[] }).panels,
  }));
const rules = [
  ...readFileSync(ALERTS, "utf8").matchAll(/- alert: (\w+)\n\s+expr: (\|\n((?:\s{10}.*\n)+)|.*)/g),
].map((m) => ({ alert: m[1] ?? "", expr: (m[3] ?? m[2] ?? "").replace(/\s+/g, " ").trim() }));

/** The metric names a PromQL expression reads: what is left once labels, ranges, strings and calls are gone. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"[^"]*"/g, "")
    .replace(/\{[^}]*\}/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\b(by|without|ignoring|on|group_left|group_right)\s*\([^)]*\)/g, "")
    .replace(/\b(group_left|group_right)\b/g, "");
  const names = [...bare.matchAll(/([A-Za-z_:][\w:]*)(\s*\()?/g)]
    .filter((m) => !m[2])
    .map((m) => m[1] ?? "")
    .filter(
      (name) => !["and", "or", "unless", "bool", "offset", "le", "inf", "nan"].includes(name.toLowerCase()),
    );
  return [...new Set(names)];
}
const asQuery = (expr: string) => expr.replaceAll("$__rate_interval", "30s");

describe("Prometheus against a running Plinth", () => {
  let known: Set<string>;
  beforeAll(async () => {
    await workload();
    // the deliveries made and recorded, and scraped at least twice since (rates need two samples)
    await waitFor(
      async () => {
        const attempts = await instant("sum by (outcome) (plinth_webhooks_attempts_total)");
        const queue = await instant("plinth_jobs_queue");
        return attempts.data.result.length >= 2 && queue.data.result.length > 0 ? true : null;
      },
      { timeoutMs: 45_000, intervalMs: 500, what: "the workload's metrics in Prometheus" },
    );
    const scrapedAt = Date.now();
    await waitFor(
      async () => {
        const up = await prom<{ result: { value: [number, string] }[] }>("/api/v1/query", {
          query: 'up{job="plinth"}',
        });
        const sample = up.data.result[0]?.value[0] ?? 0;
        return sample * 1000 > scrapedAt + 2_000 ? true : null;
      },
      { timeoutMs: 15_000, intervalMs: 250, what: "two more scrapes" },
    );
    known = new Set((await prom<string[]>("/api/v1/label/__name__/values")).data);
  }, 90_000);

  test("the target is up and serves Plinth's metrics", async () => {
    const up = await instant('up{job="plinth"}');
    expect(up.data.result).toEqual([expect.objectContaining({ value: [expect.any(Number), "1"] })]);
    for (const name of [
      "plinth_jobs_runs_total",
      "plinth_loop_ticks_total",
      "http_server_request_duration_count",
    ])
      expect(known.has(name)).toBe(true);
  });

  for (const dashboard of dashboards)
    for (const panel of dashboard.panels)
      test(`${dashboard.name}: "${panel.title}" returns series`, async () => {
        expect(panel.targets?.length ?? 0).toBeGreaterThan(0);
        for (const target of panel.targets ?? []) {
          for (const name of metricNames(target.expr))
            expect({ name, known: known.has(name) }).toEqual({ name, known: true });
          const answer = await instant(asQuery(target.expr));
          expect(answer.status).toBe("success");
          expect({ expr: target.expr, series: answer.data.result.length > 0 }).toEqual({
            expr: target.expr,
            series: true,
          });
        }
      });

  test("every alert expression evaluates and names only metrics the server has", async () => {
    expect(rules.map((r) => r.alert).sort()).toEqual([
      "PlinthAuditWriteFailures",
      "PlinthDeadJobsRising",
      "PlinthHigh5xxRate",
      "PlinthJobQueueAge",
      "PlinthLoopFailing",
      "PlinthLoopNotTicking",
      "PlinthMetricsDown",
      "PlinthNotReady",
      "PlinthWebhookBacklog",
      "PlinthWebhookEndpointsFailing",
    ]);
    for (const rule of rules) {
      for (const name of metricNames(rule.expr))
        expect({ name, known: known.has(name) }).toEqual({ name, known: true });
      const answer = await instant(rule.expr);
      expect({ alert: rule.alert, status: answer.status, error: answer.error }).toEqual({
        alert: rule.alert,
        status: "success",
        error: undefined,
      });
    }
    // and as Prometheus itself evaluates them: loaded from the file, every rule healthy
    const loaded = await prom<{
      groups: { rules: { name: string; health: string; lastError?: string }[] }[];
    }>("/api/v1/rules");
    const health = loaded.data.groups.flatMap((g) =>
      g.rules.map((r) => ({ name: r.name, health: r.health, lastError: r.lastError ?? "" })),
    );
    expect(health).toHaveLength(rules.length);
    for (const rule of health) expect(rule).toEqual({ name: rule.name, health: "ok", lastError: "" });
    // a healthy install raises none of them
    const firing = await instant('ALERTS{alertstate="firing"}');
    expect(firing.data.result).toEqual([]);
  });
});

describe("promtool", () => {
  test("check rules accepts deploy/prometheus/alerts.yml", () => {
    const run = spawnSync("promtool", ["check", "rules", ALERTS], { encoding: "utf8" });
    expect(run.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(run.status).toBe(0);
  });

  test("test rules: every alert fires on its series and stays quiet on healthy ones", () => {
    const run = spawnSync("promtool", ["test", "rules", join(ROOT, "deploy/prometheus/alerts.test.yml")], {
      encoding: "utf8",
    });
    expect(`${run.stdout}${run.stderr}`).toContain("SUCCESS");
    expect(run.status).toBe(0);
    // each alert of the file has a test that makes it fire
    const tests = readFileSync(join(ROOT, "deploy/prometheus/alerts.test.yml"), "utf8");
    for (const rule of rules)
      expect(tests).toMatch(new RegExp(`alertname: ${rule.alert}\\n\\s+exp_alerts:\\n\\s+- exp_labels`));
  });
});
