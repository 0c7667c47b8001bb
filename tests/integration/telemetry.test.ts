import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { sql } from "drizzle-orm";
import { createApp } from "../../src/app.ts";
import { execute, openDatabase } from "../../src/db/client.ts";
import { createDeps } from "../../src/deps.ts";
import { createRedactor } from "../../src/redact.ts";
import { createQueryObserver, statementOperation, statementShape } from "../../src/telemetry/db.ts";
import { tracedFetch } from "../../src/telemetry/fetch.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { disabledTelemetry } from "../../src/telemetry/otel.ts";
import { createTelemetry } from "../../src/telemetry/sdk.ts";
import { type OtlpCollector, startOtlpCollector } from "../fixtures/otlp-collector.ts";
import { type SmsGateway, startSmsGateway } from "../fixtures/sms-gateway.ts";
import { createTestApp, envConfig, type TestApp, useTestDatabase } from "../helpers/app.ts";
import { appDatabaseOf } from "../helpers/database.ts";
import { createTenant, createUser, json } from "../helpers/identity.ts";

let collector: OtlpCollector;
let gateway: SmsGateway;

afterAll(async () => {
  await Promise.allSettled([collector.stop(), gateway.stop()]);
});
const t = useTestDatabase();
beforeAll(async () => {
  collector = startOtlpCollector();
  gateway = startSmsGateway();
}, 60_000);

const PHONE = "+14155550123";

function appEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    Authentication__Sms__Provider: "http",
    Authentication__Sms__HttpUrl: gateway.url,
    Authentication__Sms__HttpApiKey: gateway.token,
    Logging__Level: "info",
    ...extra,
  };
}

describe("with OpenTelemetry:OtlpEndpoint set", () => {
  let app: TestApp;
  let tenantCode: string;

  beforeAll(async () => {
    const tenant = await createTenant(t.database.db);
    tenantCode = tenant.code;
    await createUser(t.database.db, tenant.id, { phone: PHONE });
    app = await createTestApp({
      database: t.database,
      env: appEnv({ OpenTelemetry__OtlpEndpoint: collector.url, OpenTelemetry__ServiceName: "plinth-test" }),
    });
  });

  afterAll(async () => {
    await app.deps.telemetry.shutdown();
    await app.close();
  });

  test("a request, its database statements and its outgoing call are exported as one trace", async () => {
    const incomingTrace = crypto.randomUUID().replaceAll("-", "");
    const incomingParent = "b7ad6b7169203331";
    const res = await app.request(
      "/api/auth/sms/send",
      json({ phone: PHONE, tenant: tenantCode }, { traceparent: `00-${incomingTrace}-${incomingParent}-01` }),
    );
    expect(res.status).toBe(202);
    await app.deps.pending.settled(); // the SMS lookup and send run after the answer
    await app.deps.telemetry.flush();

    const server = await collector.waitForSpan(
      (s) => s.traceId === incomingTrace && s.attributes["http.route"] === "/api/auth/sms/send",
    );
    expect(server.name).toBe("POST /api/auth/sms/send");
    expect(server.kind).toBe(2); // SERVER
    expect(server.parentSpanId).toBe(incomingParent); // continues the caller's trace
    expect(server.attributes["http.response.status_code"]).toBe(202);
    expect(server.service).toBe("plinth-test");

    const inTrace = collector.spans.filter((s) => s.traceId === incomingTrace);
    const byId = new Map(inTrace.map((s) => [s.spanId, s]));
    const descendsFromServer = (span: (typeof inTrace)[number]) => {
      let current: (typeof inTrace)[number] | undefined = span;
      while (current?.parentSpanId) {
        if (current.parentSpanId === server.spanId) return true;
        current = byId.get(current.parentSpanId);
      }
      return false;
    };

    const dbSpans = inTrace.filter((s) => s.attributes["db.system.name"] === "postgresql");
    expect(dbSpans.length).toBeGreaterThan(0);
    for (const span of dbSpans) {
      expect(descendsFromServer(span)).toBe(true);
      expect(span.kind).toBe(3); // CLIENT
      expect(typeof span.attributes["db.query.text"]).toBe("string");
    }
    expect(dbSpans.some((s) => s.attributes["db.operation.name"] === "select")).toBe(true);

    const outgoing = inTrace.find((s) => s.kind === 3 && s.attributes["server.address"] === "127.0.0.1");
    expect(outgoing).toBeDefined();
    expect(outgoing?.attributes["http.response.status_code"]).toBe(202);
    expect(outgoing && descendsFromServer(outgoing)).toBe(true);
    // the gateway got the context: same trace, the client span as parent
    expect(gateway.traceparents.at(-1)).toBe(`00-${incomingTrace}-${outgoing?.spanId}-01`);

    // no parameter values and no personal data in any span
    const everything = JSON.stringify(inTrace);
    expect(everything).not.toContain(PHONE);
    expect(everything).not.toContain(PHONE.slice(1));
    expect(everything).not.toContain(gateway.token);

    // the request's log line carries the same trace id
    const line = app.logs
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === "request" && l.traceId === incomingTrace);
    expect(line).toBeDefined();
    expect(line.spanId).toBe(server.spanId);
  });

  test("a tenant's request carries the tenant id, and metrics are exported", async () => {
    const tenant = await createTenant(t.database.db);
    await t.database.db.execute(
      sql`insert into tenant_domains (tenant_id, hostname, status, verification_token) values (${tenant.id}, ${`${tenant.code}.tenant.test`}, 'Active', 't')`,
    );
    const res = await app.request(
      `http://${tenant.code}.tenant.test/api/auth/sms/send`,
      json({ phone: PHONE }),
    );
    expect(res.status).toBe(202);
    await app.deps.pending.settled(); // the SMS lookup and send run after the answer
    await app.deps.telemetry.flush();
    const span = await collector.waitForSpan(
      (s) => s.kind === 2 && s.attributes["plinth.tenant.id"] === tenant.id,
    );
    expect(span.attributes["http.route"]).toBe("/api/auth/sms/send");
    expect(collector.metricNames.has("http.server.request.duration")).toBe(true);
    expect(collector.metricNames.has("db.client.operation.duration")).toBe(true);
    expect(collector.metricNames.has("http.client.request.duration")).toBe(true);
  });

  test("an unmatched path is named by its method only", async () => {
    const missing = await app.request("/api/no-such-route");
    expect(missing.status).toBe(404);
    await app.deps.telemetry.flush();
    const span = await collector.waitForSpan(
      (s) => s.kind === 2 && s.attributes["http.response.status_code"] === 404,
    );
    expect(span.name).toBe("GET");
    expect(span.attributes["http.route"]).toBeUndefined();
  });
});

describe("without OpenTelemetry:OtlpEndpoint", () => {
  test("nothing is sent, and the fetch and tracer are the plain ones", async () => {
    const quiet = startOtlpCollector();
    const app = await createTestApp({ database: t.database, env: appEnv() });
    try {
      expect(app.deps.telemetry.enabled).toBe(false);
      expect(app.deps.fetch).toBe(fetch);
      const tenant = await createTenant(t.database.db);
      await createUser(t.database.db, tenant.id, { phone: PHONE });
      const res = await app.request("/api/auth/sms/send", json({ phone: PHONE, tenant: tenant.code }));
      expect(res.status).toBe(202);
      await app.deps.pending.settled();
      await app.deps.telemetry.flush();
      await app.deps.telemetry.shutdown();
      expect(quiet.requests).toEqual([]);
      expect(gateway.traceparents.at(-1)).toBe("");
      const line = app.logs.map((l) => JSON.parse(l)).find((l) => l.msg === "request");
      expect(line.traceId).toBeUndefined();
    } finally {
      await quiet.stop();
      await app.close();
    }
  });

  test("tracedFetch of disabled telemetry is the given fetch", () => {
    const base = (async () => new Response("x")) as unknown as typeof fetch;
    expect(tracedFetch(disabledTelemetry(), base)).toBe(base);
  });
});

describe("slow queries", () => {
  test("statements over Database:SlowQueryMilliseconds are logged with their shape, never their values", async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: "info", redactor: createRedactor([]), write: (l) => lines.push(l) });
    const database = await openDatabase(t.url, { poolSize: 2 });
    try {
      database.setQueryObserver(
        createQueryObserver({ telemetry: disabledTelemetry(), logger, slowQueryMs: 120 }),
      );
      const marker = `value-${crypto.randomUUID()}`;
      await execute(database.db, sql`select pg_sleep(${0.25}), ${marker}::text as marker`);
      await execute(database.db, sql`select 1 as fast, ${marker}::text as marker`);
      await database.db.transaction(async (tx) => {
        await execute(tx, sql`select pg_sleep(${0.2}), ${marker}::text as in_tx`);
      });
      const slow = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === "slow query");
      expect(slow).toHaveLength(2);
      expect(slow[0].level).toBe("warn");
      expect(slow[0].statement).toBe("select pg_sleep($1), $2::text as marker");
      expect(slow[0].operation).toBe("select");
      expect(slow[0].durationMs).toBeGreaterThanOrEqual(120);
      expect(slow[0].thresholdMs).toBe(120);
      expect(slow[1].statement).toContain("in_tx");
      expect(lines.join("\n")).not.toContain(marker);
      expect(lines.join("\n")).not.toContain("0.25");
    } finally {
      await database.close();
    }
  });

  test("a failing statement is timed too and still fails", async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: "info", redactor: createRedactor([]), write: (l) => lines.push(l) });
    const database = await openDatabase(t.url, { poolSize: 1 });
    try {
      database.setQueryObserver(
        createQueryObserver({ telemetry: disabledTelemetry(), logger, slowQueryMs: 1 }),
      );
      await expect(execute(database.db, sql`select pg_sleep(0.01), 1/0`)).rejects.toThrow();
      const slow = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "slow query");
      expect(slow.outcome).toBe("error");
      expect(slow.statement).toBe("select pg_sleep(?), ?/?");
    } finally {
      await database.close();
    }
  });

  test("the duration metric and slow-query counter are exported; spans show the statement shape", async () => {
    const quiet = startOtlpCollector();
    const telemetry = createTelemetry({ endpoint: quiet.url, serviceName: "plinth-db-test" });
    const database = await openDatabase(t.url, { poolSize: 1 });
    try {
      const logger = createLogger({ level: "error", redactor: createRedactor([]), write: () => {} });
      database.setQueryObserver(createQueryObserver({ telemetry, logger, slowQueryMs: 20 }));
      await execute(database.db, sql`select pg_sleep(${0.03}), 'literal-value' as x`);
      await telemetry.flush();
      const span = await quiet.waitForSpan((s) => s.name === "db select");
      expect(span.attributes["db.query.text"]).toBe("select pg_sleep($1), ? as x");
      expect(quiet.metricNames.has("db.client.operation.duration")).toBe(true);
      expect(quiet.metricNames.has("plinth.db.slow_queries")).toBe(true);
    } finally {
      await telemetry.shutdown();
      await database.close();
      await quiet.stop();
    }
  });

  test("embedded PGlite statements are observed too, in and out of transactions", async () => {
    const seen: string[] = [];
    const database = await openDatabase("pglite:memory:");
    try {
      database.setQueryObserver({
        observe: (statement, run) => {
          seen.push(statement);
          return run();
        },
      });
      await execute(database.db, sql`select ${1}::int as one`);
      await database.db.transaction(async (tx) => {
        await execute(tx, sql`select ${2}::int as two`);
      });
      expect(seen).toContain("select $1::int as one");
      expect(seen).toContain("select $1::int as two");
    } finally {
      await database.close();
    }
  }, 30_000);

  test("statement shape and operation", () => {
    expect(statementShape("update t set a = 'x''y', b = 42 where id = $1")).toBe(
      "update t set a = ?, b = ? where id = $1",
    );
    expect(statementOperation("with due as materialized (select 1) update jobs set x = 1 returning *")).toBe(
      "update",
    );
    expect(statementOperation("  INSERT into x values ($1)")).toBe("insert");
  });
});

describe("OpenTelemetry:SampleRatio", () => {
  test("0 records no new trace, yet follows a caller that sampled its trace", async () => {
    const exporter = new InMemorySpanExporter();
    const telemetry = createTelemetry({
      serviceName: "plinth",
      sampleRatio: 0,
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
    });
    const deps = await createDeps(envConfig({}), {
      database: appDatabaseOf(t.database),
      telemetry,
      logWrite: () => {},
    });
    const app = createApp(deps);
    const get = (headers: Record<string, string> = {}) =>
      app.fetch(new Request("http://localhost/api/health", { headers }), { peerAddress: "127.0.0.1" });
    expect((await get()).status).toBe(200);
    expect(exporter.getFinishedSpans()).toHaveLength(0);
    const traceId = crypto.randomUUID().replaceAll("-", "");
    expect((await get({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` })).status).toBe(200);
    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(1);
    expect(spans[0]?.spanContext().traceId).toBe(traceId);
    await telemetry.shutdown();
  });
});
