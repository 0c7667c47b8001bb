import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { type OtlpCollector, startOtlpCollector } from "../fixtures/otlp-collector.ts";
import { type SmsGateway, startSmsGateway } from "../fixtures/sms-gateway.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { tracked } from "../helpers/children.ts";
import { createUser, PASSWORD, readyPlatformUser } from "../helpers/identity.ts";
import { cleanEnv, ROOT } from "../helpers/process.ts";
import { validProductionEnv } from "../helpers/production-env.ts";

/**
 * Every line a real API process writes during a whole session (start-up, sign-in, token refresh,
 * admin calls, a tenant secret, an SMS through the gateway, a failed statement answering 500,
 * shutdown) and every span it exports: none holds a secret, a password, a token, key material,
 * or a failed statement's parameter values.
 */
let gateway: SmsGateway;
let collector: OtlpCollector;
afterAll(async () => {
  await Promise.allSettled([gateway.stop(), collector.stop()]);
});
const t = useTestDatabase();
beforeAll(async () => {
  gateway = startSmsGateway(`sms-key-${randomBytes(12).toString("hex")}`);
  collector = startOtlpCollector();
}, 60_000);

test("an API process run logs no secret, password, token, key or parameter value", async () => {
  const dbPassword = `db-pw-${randomBytes(8).toString("hex")}`;
  const url = new URL(t.url);
  url.username = "postgres";
  url.password = dbPassword; // trust auth ignores it; it must still never be printed
  const bootstrapPassword = `bootstrap-${randomBytes(10).toString("hex")}`;
  const env = validProductionEnv({
    PLINTH_ENVIRONMENT: "Development",
    DATABASE_URL: url.toString(),
    CACHE_URL: undefined,
    PORT: "0",
    Logging__Level: "debug",
    AllowedHosts__0: "127.0.0.1",
    Tenancy__Resolution__PlatformHost: "127.0.0.1",
    Tenancy__Resolution__TenantCodePaths__0: "/api/auth/", // the SMS sign-in below names its tenant
    Authentication__Sms__Provider: "http",
    Authentication__Sms__HttpUrl: gateway.url,
    Authentication__Sms__HttpApiKey: gateway.token,
    PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: bootstrapPassword,
    OpenTelemetry__OtlpEndpoint: collector.url,
    BackgroundProcessing__JobPollSeconds: "1",
  });
  const admin = await readyPlatformUser(t.database.db);

  const proc = tracked(
    Bun.spawn(["bun", "src/server.ts"], {
      cwd: ROOT,
      env: cleanEnv(env),
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const stdoutLines: string[] = [];
  const stderrText = new Response(proc.stderr).text();
  let resolvePort: (port: number) => void = () => {};
  const listening = new Promise<number>((resolve) => {
    resolvePort = resolve;
  });
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of proc.stdout) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        stdoutLines.push(line);
        const record = JSON.parse(line) as { msg?: string; port?: number };
        if (record.msg === "listening" && record.port) resolvePort(record.port);
      }
    }
    if (buffer) stdoutLines.push(buffer);
  })();

  const secrets: string[] = [
    dbPassword,
    bootstrapPassword,
    PASSWORD,
    gateway.token,
    env.PLINTH_TENANT_SECRET_MASTER_KEY ?? "",
    env.PLINTH_SMS_CODE_PEPPER ?? "",
    env.PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD ?? "",
  ];
  const privateKey = env.Security__Jwt__PrivateKey ?? "";
  for (const line of privateKey.split("\n"))
    if (line.length >= 16 && !line.startsWith("-----")) secrets.push(line);
  const personal: string[] = [admin.email];

  try {
    const port = await Promise.race([
      listening,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("server did not start")), 20_000)),
    ]);
    const base = `http://127.0.0.1:${port}`;
    const call = (path: string, init: RequestInit = {}) => fetch(`${base}${path}`, init);
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      call(path, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });

    expect((await call("/api/health")).status).toBe(200);
    expect((await call("/api/health/ready")).status).toBe(200);
    expect(
      (await post("/api/auth/login", { email: admin.email, password: "wrong-password-123" })).status,
    ).toBe(401);
    const login = await post("/api/auth/login", { email: admin.email, password: PASSWORD });
    expect(login.status).toBe(200);
    const tokens = (await login.json()) as { accessToken: string; refreshToken: string };
    secrets.push(tokens.accessToken, tokens.refreshToken);

    const refreshed = await post("/api/auth/refresh", { refreshToken: tokens.refreshToken });
    expect(refreshed.status).toBe(200);
    const next = (await refreshed.json()) as { accessToken: string; refreshToken: string };
    secrets.push(next.accessToken, next.refreshToken);
    const auth = { authorization: `Bearer ${next.accessToken}` };

    const code = `red${randomBytes(3).toString("hex")}`;
    const created = await post("/api/admin/tenants", { code, name: "Redaction Ltd" }, auth);
    expect(created.status).toBe(201);
    const tenant = (await created.json()) as { id: string };
    const tenantSecret = `tenant-secret-${randomBytes(12).toString("hex")}`;
    secrets.push(tenantSecret);
    const put = await call(`/api/admin/tenants/${tenant.id}/secrets/payment-api-key`, {
      method: "PUT",
      headers: { "content-type": "application/json", ...auth },
      body: JSON.stringify({ value: tenantSecret }),
    });
    expect(put.status).toBe(204);
    // reusing a spent refresh token: refused (and logged as such, without the token)
    expect((await post("/api/auth/refresh", { refreshToken: tokens.refreshToken })).status).toBe(401);

    const phone = "+14155550177";
    personal.push(phone);
    const member = await createUser(t.database.db, tenant.id, { phone });
    personal.push(member.email);
    expect((await post("/api/auth/sms/send", { phone, tenant: code })).status).toBe(202);
    // the code is stored and sent after the answer: poll for it, with a deadline
    const deadline = Date.now() + 10_000;
    while (gateway.lastCode(phone) === undefined && Date.now() < deadline) await Bun.sleep(10);
    const smsCode = gateway.lastCode(phone);
    expect(smsCode).toBeDefined();
    const verified = await post("/api/auth/sms/verify", { phone, tenant: code, code: smsCode });
    expect(verified.status).toBe(200);
    const smsTokens = (await verified.json()) as { accessToken: string; refreshToken: string };
    secrets.push(smsTokens.accessToken, smsTokens.refreshToken);

    // a failed statement answering 500: its error message would list the parameter values
    await execute(t.database.db, sql`alter table sessions rename to sessions_away`);
    try {
      const failed = await post("/api/auth/login", { email: member.email, password: PASSWORD, tenant: code });
      expect(failed.status).toBe(500);
      const problem = (await failed.json()) as { code?: string; detail?: string };
      expect(JSON.stringify(problem)).not.toContain("sessions");
    } finally {
      await execute(t.database.db, sql`alter table sessions_away rename to sessions`);
    }
  } finally {
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    await reading;
  }

  const stderr = await stderrText;
  const records = stdoutLines.map((line) => JSON.parse(line) as Record<string, unknown>);
  // the session really happened and was logged
  expect(records.some((r) => r.msg === "request" && r.path === "/api/auth/sms/verify")).toBe(true);
  const crash = records.find((r) => r.msg === "unhandled error") as
    | { error: { message: string; statement?: string; code?: string } }
    | undefined;
  expect(crash?.error.statement).toContain('insert into "sessions"');
  expect(crash?.error.code).toBe("42P01");
  expect(records.some((r) => typeof r.traceId === "string")).toBe(true);

  const everything = [...stdoutLines, stderr, JSON.stringify(collector.spans)].join("\n");
  expect(collector.spans.length).toBeGreaterThan(0);
  for (const secret of secrets) {
    expect(secret.length).toBeGreaterThan(7);
    if (everything.includes(secret))
      throw new Error(`a secret appears in the output: ${secret.slice(0, 6)}…`);
  }
  for (const value of personal)
    if (everything.includes(value)) throw new Error(`personal data appears in the output: ${value}`);
  expect(everything).not.toContain("BEGIN PRIVATE KEY");
  expect(everything).not.toContain("params:");
  expect(everything).not.toContain("Failed query");
}, 90_000);
