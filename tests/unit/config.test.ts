import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/config/config-error.ts";
import { type LoadOptions, loadConfig } from "../../src/config/load.ts";
import { fakePem, rsaKeys, validProductionEnv } from "../helpers/production-env.ts";

function configDir(files: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "plinth-config-"));
  for (const [name, content] of Object.entries(files))
    writeFileSync(join(dir, name), JSON.stringify(content));
  return dir;
}

function load(
  env: Record<string, string | undefined>,
  files: Record<string, unknown> = {},
  options: LoadOptions = {},
) {
  return loadConfig({ env, configDir: configDir(files), ...options });
}

function problemsOf(fn: () => unknown): { key: string; problem: string }[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("defaults", () => {
  test("every key of the spec's background tables has the spec's default", () => {
    const { settings, environment } = load({});
    expect(environment).toBe("Development");
    expect(settings.BackgroundProcessing).toMatchObject({
      Enabled: true,
      JobPollSeconds: 2,
      JobParallelism: 4,
      JobBatchSize: 5,
      JobsEnabled: true,
      JobMaxAttempts: 10,
      JobRetryBaseSeconds: 5,
      JobRetryMaxSeconds: 3600,
      JobRetentionDays: 7,
      JobDeadRetentionDays: 30,
    });
    expect(settings.TenantDomains).toMatchObject({
      Enabled: true,
      PollSeconds: 60,
      BatchSize: 50,
      VerificationRecordPrefix: "_plinth-verification",
      AllowedCnameTargets: [],
      GatewayBaseUrl: null,
      GatewayApiKey: null,
    });
    expect(settings.TenantDomains.DnsJsonEndpoint).toStartWith("https://");
    expect(settings.SaasSubscriptions).toMatchObject({ Enabled: true, BatchSize: 100, PastDueGraceDays: 7 });
    expect(settings.FeatureUsageReconciliation).toEqual({
      Enabled: true,
      BatchSize: 100,
      IntervalMinutes: 60,
      CountApiCalls: true,
      ApiCallsFlushSeconds: 10,
    });
    expect(settings.Server.Port).toBe(8080);
  });
});

describe("sources and precedence", () => {
  test("an empty variable is not set: the files' value still applies", () => {
    const { settings } = load(
      { DATABASE_URL: "postgres://x@h/db", Server__MaxBodyBytes: "", Server__Port: "" },
      { "appsettings.json": { Server: { MaxBodyBytes: 2048, Port: 1234 } } },
    );
    expect(settings.Server.MaxBodyBytes).toBe(2048);
    expect(settings.Server.Port).toBe(1234);
  });

  test("fractional numbers come from the environment; integers stay integers", () => {
    const { settings } = load({ DATABASE_URL: "postgres://x@h/db", OpenTelemetry__SampleRatio: "0.25" });
    expect(settings.OpenTelemetry.SampleRatio).toBe(0.25);
    expect(problemsOf(() => load({ DATABASE_URL: "postgres://x@h/db", Server__Port: "80.5" }))[0]?.key).toBe(
      "Server:Port",
    );
    expect(problemsOf(() => load({ DATABASE_URL: "postgres://x@h/db", Server__Port: "70000" }))[0]?.key).toBe(
      "Server:Port",
    );
  });

  test("appsettings.json < appsettings.{Environment}.json < Section__Key < PLINTH_* overrides < explicit", () => {
    const files = {
      "appsettings.json": {
        BackgroundProcessing: { JobPollSeconds: 3, JobBatchSize: 7, JobParallelism: 9 },
        Authentication: { Sms: { CodePepper: "from-json-file-pepper-xxxxxxxxxxxxxxxx" } },
        Server: { Port: 1000 },
      },
      "appsettings.Staging.json": { BackgroundProcessing: { JobPollSeconds: 4, JobBatchSize: 8 } },
      "appsettings.Development.json": { BackgroundProcessing: { JobPollSeconds: 99 } },
    };
    const env = {
      PLINTH_ENVIRONMENT: "Staging",
      DATABASE_URL: "postgres://x@h/db",
      BackgroundProcessing__JobPollSeconds: "5",
      Authentication__Sms__CodePepper: "from-env-section-pepper-xxxxxxxxxxxxxxxx",
      PLINTH_SMS_CODE_PEPPER: "from-override-pepper-xxxxxxxxxxxxxxxxxxxx",
      Server__Port: "2000",
      PORT: "3000",
    };
    const { settings, environment } = loadConfig({
      env,
      configDir: configDir(files),
      overrides: { "BackgroundProcessing:JobParallelism": "11" },
    });
    expect(environment).toBe("Staging");
    expect(settings.BackgroundProcessing.JobPollSeconds).toBe(5); // env over both files
    expect(settings.BackgroundProcessing.JobBatchSize).toBe(8); // environment file over base file
    expect(settings.BackgroundProcessing.JobParallelism).toBe(11); // explicit over all
    expect(settings.Authentication.Sms.CodePepper).toBe("from-override-pepper-xxxxxxxxxxxxxxxxxxxx");
    expect(settings.Server.Port).toBe(3000); // PORT wins over Server__Port
  });

  test("arrays from Key__0 variables, JSON arrays, or a ;-separated value; keys are case-insensitive", () => {
    const a = load({ AllowedHosts__0: "a.example.com", AllowedHosts__1: "b.example.com" });
    expect(a.settings.AllowedHosts).toEqual(["a.example.com", "b.example.com"]);
    const b = load({}, { "appsettings.json": { Cors: { Origins: ["https://x.example"] } } });
    expect(b.settings.Cors.Origins).toEqual(["https://x.example"]);
    const c = load({ AllowedHosts: "a.example.com;b.example.com" });
    expect(c.settings.AllowedHosts).toEqual(["a.example.com", "b.example.com"]);
    const d = load({
      backgroundprocessing__jobpollseconds: "9",
      TENANTDOMAINS__ALLOWEDCNAMETARGETS__0: "edge.example.net",
    });
    expect(d.settings.BackgroundProcessing.JobPollSeconds).toBe(9);
    expect(d.settings.TenantDomains.AllowedCnameTargets).toEqual(["edge.example.net"]);
    const keys = load({
      Security__Jwt__VerificationKeys__0__KeyId: "k0",
      Security__Jwt__VerificationKeys__0__PublicKey: "pem",
    });
    expect(keys.settings.Security.Jwt.VerificationKeys).toEqual([{ KeyId: "k0", PublicKey: "pem" }]);
  });

  test("booleans and integers from strings; an empty variable counts as unset", () => {
    const { settings } = load({
      BackgroundProcessing__Enabled: "false",
      TenantDomains__Enabled: "TRUE",
      Server__Port: "",
    });
    expect(settings.BackgroundProcessing.Enabled).toBe(false);
    expect(settings.TenantDomains.Enabled).toBe(true);
    expect(settings.Server.Port).toBe(8080);
  });

  test("a wrong type names the key and the expected type, not the value", () => {
    const problems = problemsOf(() =>
      load({
        BackgroundProcessing__JobPollSeconds: "soon",
        BackgroundProcessing__Enabled: "maybe",
        TenantDomains__DnsJsonEndpoint: "nope",
      }),
    );
    expect(problems).toContainEqual({
      key: "BackgroundProcessing:JobPollSeconds",
      problem: "must be an integer ≥ 1",
    });
    expect(problems).toContainEqual({
      key: "BackgroundProcessing:Enabled",
      problem: "must be true or false",
    });
    expect(problems).toContainEqual({ key: "TenantDomains:DnsJsonEndpoint", problem: "must be a URL" });
    expect(JSON.stringify(problems)).not.toContain("soon");
  });

  test("a Prometheus port equal to Server:Port is refused, naming both keys", () => {
    const problems = problemsOf(() => load({ PORT: "9464", OpenTelemetry__Prometheus__Port: "9464" }));
    expect(problems).toEqual([
      {
        key: "OpenTelemetry:Prometheus:Port",
        problem:
          "equals Server:Port (9464): /metrics has a listener of its own, never the API's; choose another port",
      },
    ]);
    expect(
      load({ PORT: "8080", OpenTelemetry__Prometheus__Port: "9464" }).settings.OpenTelemetry.Prometheus.Port,
    ).toBe(9464);
  });

  test("an unknown environment name is refused; names are case-insensitive", () => {
    expect(problemsOf(() => load({ PLINTH_ENVIRONMENT: "Prod" }))[0]?.key).toBe("PLINTH_ENVIRONMENT");
    expect(load({ PLINTH_ENVIRONMENT: "staging", DATABASE_URL: "postgres://h/db" }).environment).toBe(
      "Staging",
    );
  });

  test("invalid JSON in a settings file is named", () => {
    const dir = configDir();
    writeFileSync(join(dir, "appsettings.json"), "{ nope");
    expect(problemsOf(() => loadConfig({ env: {}, configDir: dir }))[0]?.key).toEndWith("appsettings.json");
  });

  test("invalid JSON is located by line, and the offending value is never quoted", () => {
    const secret = "Sup3rS3cretPw-not-quoted";
    for (const [text, line] of [
      [`{\n  "Security": {\n    "MasterKey": ${secret}\n  }\n}`, 3],
      [`{\n  "AllowedHosts": [\n    "a.test",\n    "b.test"\n  ],\n  "Key": ${secret}\n}`, 6],
      [`{\n  "A": "x"\n  "B": "${secret}"\n}`, 3],
    ] as const) {
      const dir = configDir();
      writeFileSync(join(dir, "appsettings.json"), text);
      const [problem] = problemsOf(() => loadConfig({ env: {}, configDir: dir }));
      expect(problem?.problem).toBe(`is not valid JSON (near line ${line})`);
      expect(JSON.stringify(problem)).not.toContain("Sup3rS3cret");
    }
  });

  test("storage from STORAGE_* and from the provider family S3_*; STORAGE_* wins where both are set", () => {
    const { settings } = load({
      DATABASE_URL: "postgres://x@h/db",
      S3_BUCKET: "from-s3-family",
      S3_REGION: "eu-west-1",
      S3_ENDPOINT: "http://s3.internal:9000",
      S3_FORCE_PATH_STYLE: "true",
      STORAGE_BUCKET: "from-storage",
      STORAGE_ALLOWED_MIME_TYPES: "image/png;application/pdf",
      STORAGE_PRESIGN_SECONDS: "120",
    });
    expect(settings.Storage.S3.Bucket).toBe("from-storage");
    expect(settings.Storage.S3.Region).toBe("eu-west-1");
    expect(settings.Storage.S3.Endpoint).toBe("http://s3.internal:9000");
    expect(settings.Storage.S3.ForcePathStyle).toBe(true);
    expect(settings.Storage.AllowedMimeTypes).toEqual(["image/png", "application/pdf"]);
    expect(settings.Storage.PresignSeconds).toBe(120);
  });

  test("Section:Key variables count like Section__Key ones", () => {
    const { settings } = load({
      DATABASE_URL: "postgres://x@h/db",
      "BackgroundProcessing:Enabled": "false",
      "Server:Port": "9090",
    });
    expect(settings.BackgroundProcessing.Enabled).toBe(false);
    expect(settings.Server.Port).toBe(9090);
  });
});

describe("database resolution", () => {
  test("ConnectionStrings:Database, then DATABASE_URL", () => {
    const both = load({
      ConnectionStrings__Database: "postgres://a@h/one",
      DATABASE_URL: "postgres://b@h/two",
    });
    expect(both.database).toMatchObject({ url: "postgres://a@h/one", source: "ConnectionStrings:Database" });
    const env = load({ DATABASE_URL: "postgres://b@h/two" });
    expect(env.database).toMatchObject({ url: "postgres://b@h/two", source: "DATABASE_URL" });
  });

  test("Development falls back to database plinth on localhost as the OS user", () => {
    const { database } = load({});
    expect(database.url).toBe(`postgres://${userInfo().username}@localhost:5432/plinth`);
    expect(database.source).toBe("development default");
  });

  test("pglite URLs select the embedded database; --embedded makes it the fallback", () => {
    expect(load({ DATABASE_URL: "pglite:memory:" }).database.embedded).toBe(true);
    expect(load({ DATABASE_URL: "pglite:./.data/x" }).database.embedded).toBe(true);
    const fallback = load({}, {}, { embeddedFallback: true });
    expect(fallback.database).toMatchObject({
      url: "pglite:./.data/dev",
      embedded: true,
      source: "embedded default",
    });
    // a configured database still wins over the embedded fallback
    expect(load({ DATABASE_URL: "postgres://h/db" }, {}, { embeddedFallback: true }).database.embedded).toBe(
      false,
    );
  });

  test("Staging and Production refuse to start without a database", () => {
    expect(problemsOf(() => load({ PLINTH_ENVIRONMENT: "Staging" }))).toContainEqual({
      key: "ConnectionStrings:Database",
      problem: "is required (or DATABASE_URL) outside Development",
    });
    const keys = problemsOf(() => load(validProductionEnv({ DATABASE_URL: undefined }))).map((p) => p.key);
    expect(keys).toEqual(["ConnectionStrings:Database"]);
  });
});

describe("cache resolution", () => {
  test("ConnectionStrings:Cache, then CACHE_URL; optional in Development", () => {
    expect(load({ ConnectionStrings__Cache: "redis://a:6379", CACHE_URL: "redis://b:6379" }).cache).toEqual({
      url: "redis://a:6379",
      source: "ConnectionStrings:Cache",
    });
    expect(load({ CACHE_URL: "redis://b:6379" }).cache?.source).toBe("CACHE_URL");
    expect(load({}).cache).toBeNull();
  });

  test("required in Production", () => {
    const keys = problemsOf(() => load(validProductionEnv({ CACHE_URL: undefined }))).map((p) => p.key);
    expect(keys).toEqual(["ConnectionStrings:Cache"]);
  });
});

describe("Production start-up checks", () => {
  test("a complete Production configuration passes", () => {
    const config = load(validProductionEnv());
    expect(config.environment).toBe("Production");
    expect(config.cache?.source).toBe("CACHE_URL");
  });

  test("the migrator needs only the database in Production", () => {
    const config = load(
      { PLINTH_ENVIRONMENT: "Production", DATABASE_URL: "postgres://h/db" },
      {},
      { process: "migrator" },
    );
    expect(config.environment).toBe("Production");
  });

  const other = rsaKeys();
  const cases: [string, Record<string, string | undefined>, string][] = [
    ["JWT issuer missing", { Security__Jwt__Issuer: undefined }, "Security:Jwt:Issuer"],
    ["JWT audience missing", { Security__Jwt__Audience: undefined }, "Security:Jwt:Audience"],
    ["current key id missing", { Security__Jwt__CurrentKeyId: undefined }, "Security:Jwt:CurrentKeyId"],
    [
      "no private key for the current key id",
      { Security__Jwt__PrivateKey: undefined },
      "Security:Jwt:PrivateKey",
    ],
    ["private key does not parse", { Security__Jwt__PrivateKey: fakePem("AAAA") }, "Security:Jwt:PrivateKey"],
    [
      "verification key does not parse",
      {
        Security__Jwt__VerificationKeys__1__KeyId: "k0",
        Security__Jwt__VerificationKeys__1__PublicKey: "garbage",
      },
      "Security:Jwt:VerificationKeys:1:PublicKey",
    ],
    [
      "current kid listed with another public key",
      { Security__Jwt__VerificationKeys__0__PublicKey: other.publicKeyPem },
      "Security:Jwt:VerificationKeys",
    ],
    [
      "data protection application name missing",
      { PLINTH_DATA_PROTECTION_APPLICATION_NAME: undefined },
      "Security:DataProtection:ApplicationName",
    ],
    [
      "certificate path missing",
      { PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: undefined },
      "Security:DataProtection:CertificatePath",
    ],
    [
      "certificate unreadable",
      { PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: "/nonexistent/dp.pfx" },
      "Security:DataProtection:CertificatePath",
    ],
    [
      "certificate password wrong",
      { PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: "wrong-password" },
      "Security:DataProtection:CertificatePath",
    ],
    [
      "tenant secret key id missing",
      { PLINTH_TENANT_SECRET_KEY_ID: undefined },
      "Security:TenantSecrets:KeyId",
    ],
    [
      "master key not Base64",
      { PLINTH_TENANT_SECRET_MASTER_KEY: "not base64 at all!" },
      "Security:TenantSecrets:MasterKey",
    ],
    [
      "master key 31 bytes",
      { PLINTH_TENANT_SECRET_MASTER_KEY: Buffer.alloc(31, 1).toString("base64") },
      "Security:TenantSecrets:MasterKey",
    ],
    [
      "master key 33 bytes",
      { PLINTH_TENANT_SECRET_MASTER_KEY: Buffer.alloc(33, 1).toString("base64") },
      "Security:TenantSecrets:MasterKey",
    ],
    ["SMS pepper too short", { PLINTH_SMS_CODE_PEPPER: "x".repeat(31) }, "Authentication:Sms:CodePepper"],
    [
      "platform host missing",
      { Tenancy__Resolution__PlatformHost: undefined },
      "Tenancy:Resolution:PlatformHost",
    ],
    [
      "platform host with a scheme",
      { Tenancy__Resolution__PlatformHost: "https://api.example.com" },
      "Tenancy:Resolution:PlatformHost",
    ],
    [
      "trusted proxy not an IP",
      { Tenancy__Resolution__TrustedProxies__0: "proxy.local" },
      "Tenancy:Resolution:TrustedProxies:0",
    ],
    ["AllowedHosts empty", { AllowedHosts__0: undefined }, "AllowedHosts"],
    ["AllowedHosts wildcard", { AllowedHosts__1: "*.example.com" }, "AllowedHosts:1"],
    ["CORS wildcard origin", { Cors__Origins__0: "*" }, "Cors:Origins:0"],
    ["CORS * header", { Cors__Headers__0: "*", Cors__AllowCredentials: "false" }, "Cors:Headers:0"],
    ["CORS * method", { Cors__Methods__1: "*" }, "Cors:Methods:1"],
    ["CORS origins without headers", { Cors__Headers__0: undefined }, "Cors:Headers"],
    [
      "browser-auth origin not http(s)",
      { BrowserAuth__AllowedOrigins__0: "ftp://app.example.com" },
      "BrowserAuth:AllowedOrigins:0",
    ],
    [
      "browser-auth origin with a path",
      { BrowserAuth__AllowedOrigins__0: "https://app.example.com/login" },
      "BrowserAuth:AllowedOrigins:0",
    ],
    [
      "global rate limit missing",
      { RateLimiting__Global__PermitLimit: undefined },
      "RateLimiting:Global:PermitLimit",
    ],
    [
      "auth rate window missing",
      { RateLimiting__Auth__WindowSeconds: undefined },
      "RateLimiting:Auth:WindowSeconds",
    ],
  ];
  for (const [name, change, key] of cases) {
    test(`refused: ${name} (${key})`, () => {
      const problems = problemsOf(() => load(validProductionEnv(change)));
      expect(problems.map((p) => p.key)).toContain(key);
    });
  }

  test("every failure is listed in one message, by key, never by value", () => {
    const env = validProductionEnv({
      PLINTH_TENANT_SECRET_MASTER_KEY: "short-but-secret-master-key-value",
      PLINTH_SMS_CODE_PEPPER: "tiny-secret-pepper",
      Security__Jwt__PrivateKey: fakePem("c2VjcmV0LWp3dC1rZXktbWF0ZXJpYWw="),
      AllowedHosts__0: undefined,
    });
    let message = "";
    try {
      load(env);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("Refusing to start in Production");
    for (const key of [
      "Security:TenantSecrets:MasterKey",
      "Authentication:Sms:CodePepper",
      "Security:Jwt:PrivateKey",
      "AllowedHosts",
    ]) {
      expect(message).toContain(key);
    }
    for (const secret of [
      "short-but-secret-master-key-value",
      "tiny-secret-pepper",
      "c2VjcmV0LWp3dC1rZXktbWF0ZXJpYWw=",
      "db-password-123",
      "cache-password-456",
    ]) {
      expect(message).not.toContain(secret);
    }
  });
});
