import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/config/config-error.ts";
import { loadConfig } from "../../src/config/load.ts";
import { createRedactor } from "../../src/redact.ts";
import { rsaKeys, validProductionEnv } from "../helpers/production-env.ts";

function dirWith(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "plinth-sources-"));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

function problemsOf(fn: () => unknown): { key: string; problem: string }[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

const typos = {
  Database__PoolSise: "5",
  Logging__Levle: "debug",
  Server__ShutdownTimeoutSecond: "10",
  // other software's variables: first segment is not a section of ours
  DOTNET__Something: "x",
  npm_config__foo: "y",
};

describe("unknown keys", () => {
  test("Development: misspelled variables and file keys are warnings naming the closest key", () => {
    const dir = dirWith({
      "appsettings.json": JSON.stringify({
        Databse: { PoolSize: 3 },
        Cors: { Orgins: ["https://a.example"] },
      }),
      "appsettings.production.json": "{}",
    });
    const config = loadConfig({ env: typos, configDir: dir });
    const lines = config.warnings.map((w) => `${w.key}: ${w.problem}`);
    expect(lines).toContainEqual(expect.stringContaining("did you mean `Database:PoolSize`?"));
    expect(lines.find((l) => l.startsWith("Logging__Levle"))).toContain("did you mean `Logging:Level`?");
    expect(lines.find((l) => l.startsWith("Server__ShutdownTimeoutSecond"))).toContain(
      "did you mean `Server:ShutdownTimeoutSeconds`?",
    );
    expect(lines.find((l) => l.includes("Databse"))).toContain("did you mean `Database`?");
    expect(lines.find((l) => l.includes("Orgins"))).toContain("did you mean `Cors:Origins`?");
    expect(lines.find((l) => l.includes("appsettings.production.json"))).toContain(
      "did you mean `appsettings.Production.json`?",
    );
    expect(lines.some((l) => l.includes("DOTNET") || l.includes("npm_config"))).toBe(false);
    expect(config.warnings).toHaveLength(6);
  });

  test("Production: unknown keys are refused with the other problems, unless Configuration:AllowUnknownKeys", () => {
    const env = validProductionEnv({ ...typos, Security__Jwt__Issuer: undefined });
    const problems = problemsOf(() => loadConfig({ env, configDir: dirWith() }));
    expect(problems.map((p) => p.key)).toEqual(
      expect.arrayContaining(["Database__PoolSise", "Logging__Levle", "Server__ShutdownTimeoutSecond"]),
    );
    expect(problems.map((p) => p.key)).toContain("Security:Jwt:Issuer");
    const allowed = loadConfig({
      env: { ...validProductionEnv(typos), Configuration__AllowUnknownKeys: "true" },
      configDir: dirWith(),
    });
    expect(allowed.warnings).toHaveLength(3);
    expect(problemsOf(() => loadConfig({ env: validProductionEnv(), configDir: dirWith() }))).toEqual([]);
  });
});

describe("secrets from files", () => {
  test("<VARIABLE>_FILE reads the value from a file (trailing newline trimmed), for overrides and Section__Key", () => {
    const master = randomBytes(32).toString("base64");
    const jwt = rsaKeys();
    const dir = dirWith({
      master: `${master}\n`,
      jwt: jwt.privateKeyPem,
      db: "postgres://u:dbpw-123@h/db\n",
    });
    const env = validProductionEnv({
      PLINTH_TENANT_SECRET_MASTER_KEY: undefined,
      PLINTH_TENANT_SECRET_MASTER_KEY_FILE: join(dir, "master"),
      Security__Jwt__PrivateKey: undefined,
      Security__Jwt__PrivateKey_FILE: join(dir, "jwt"),
      Security__Jwt__VerificationKeys__0__PublicKey: jwt.publicKeyPem,
      DATABASE_URL: undefined,
      DATABASE_URL_FILE: join(dir, "db"),
      PLINTH_TENANT_SECRET_KEY_ID: "ts-2026-11-23",
      Security__TenantSecrets__PreviousKeys__0__KeyId: "ts-2026-01-01",
      Security__TenantSecrets__PreviousKeys__0__MasterKey: randomBytes(32).toString("base64"),
    });
    const config = loadConfig({ env, configDir: dirWith() });
    expect(config.settings.Security.TenantSecrets.MasterKey).toBe(master);
    expect(config.settings.Security.Jwt.PrivateKey).toBe(jwt.privateKeyPem.replace(/\n$/, ""));
    expect(config.database.url).toBe("postgres://u:dbpw-123@h/db");
    expect(config.secretValues).toContain(master);
    // the path is not a secret; the key id is not either
    expect(config.secretValues).not.toContain(join(dir, "master"));
    // key ids are not secret (the API returns them): logs show them
    expect(config.secretValues).not.toContain("ts-2026-11-23");
    expect(config.secretValues).not.toContain("ts-2026-01-01");
    const line = "keys ts-2026-11-23 and ts-2026-01-01";
    expect(createRedactor(config.secretValues).text(line)).toBe(line);
  });

  test("both set is an error naming both; an unreadable file names its path", () => {
    const dir = dirWith({ master: randomBytes(32).toString("base64") });
    const both = validProductionEnv({ PLINTH_TENANT_SECRET_MASTER_KEY_FILE: join(dir, "master") });
    expect(problemsOf(() => loadConfig({ env: both, configDir: dirWith() }))).toEqual([
      {
        key: "PLINTH_TENANT_SECRET_MASTER_KEY and PLINTH_TENANT_SECRET_MASTER_KEY_FILE",
        problem: "are both set: set only one of them",
      },
    ]);
    const missing = validProductionEnv({
      PLINTH_SMS_CODE_PEPPER: undefined,
      PLINTH_SMS_CODE_PEPPER_FILE: join(dir, "absent"),
    });
    const problems = problemsOf(() => loadConfig({ env: missing, configDir: dirWith() }));
    expect(problems[0]).toEqual({
      key: "PLINTH_SMS_CODE_PEPPER_FILE",
      problem: `names a file that cannot be read: ${join(dir, "absent")}`,
    });
  });

  test("a one-line PEM with literal \\n is accepted", () => {
    const jwt = rsaKeys();
    const oneLine = jwt.privateKeyPem.trim().replaceAll("\n", "\\n");
    const config = loadConfig({
      env: validProductionEnv({
        Security__Jwt__PrivateKey: oneLine,
        Security__Jwt__VerificationKeys__0__PublicKey: jwt.publicKeyPem.trim().replaceAll("\n", "\\n"),
      }),
      configDir: dirWith(),
    });
    expect(config.settings.Security.Jwt.PrivateKey).toBe(jwt.privateKeyPem.trim());
  });
});

describe("messages name the variable the operator set", () => {
  test("a bad master key from PLINTH_TENANT_SECRET_MASTER_KEY names it and how to make one", () => {
    const bad = randomBytes(16).toString("base64");
    const problems = problemsOf(() =>
      loadConfig({ env: validProductionEnv({ PLINTH_TENANT_SECRET_MASTER_KEY: bad }), configDir: dirWith() }),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]?.problem).toContain("set by PLINTH_TENANT_SECRET_MASTER_KEY");
    expect(problems[0]?.problem).toContain("openssl rand -base64 32");
    expect(JSON.stringify(problems)).not.toContain(bad);
    const viaSection = problemsOf(() =>
      loadConfig({
        env: validProductionEnv({
          PLINTH_TENANT_SECRET_MASTER_KEY: undefined,
          Security__TenantSecrets__MasterKey: bad,
        }),
        configDir: dirWith(),
      }),
    );
    expect(viaSection[0]?.problem).not.toContain("set by PLINTH_");
  });
});
