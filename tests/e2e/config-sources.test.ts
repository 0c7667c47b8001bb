import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useTestDatabase } from "../helpers/app.ts";
import { runEntry } from "../helpers/process.ts";
import { validProductionEnv } from "../helpers/production-env.ts";

/** Unknown keys and `_FILE` secrets as the real API and migrator processes report them. */
const t = useTestDatabase();

describe("configuration sources, in the real processes", () => {
  test("Production API: a misspelled key is refused with the other problems, naming the closest key", async () => {
    const run = await runEntry(
      "src/server.ts",
      [],
      validProductionEnv({
        Database__PoolSise: "5",
        Logging__Levle: "debug",
        PLINTH_SMS_CODE_PEPPER: "short",
      }),
    );
    expect(run.exitCode).toBe(1);
    const output = run.stdout + run.stderr;
    expect(output).toContain("Refusing to start in Production: 3 configuration problem(s)");
    expect(output).toContain(
      "Database__PoolSise: is not a known configuration key (`Database:PoolSise`): did you mean `Database:PoolSize`?",
    );
    expect(output).toContain("did you mean `Logging:Level`?");
    expect(output).toContain("Authentication:Sms:CodePepper");
  });

  test("Development migrator: the same key is a warning and the run goes on", async () => {
    const run = await runEntry("src/migrate.ts", ["--status"], {
      DATABASE_URL: t.url,
      Database__PoolSise: "5",
    });
    expect(run.exitCode).toBe(0);
    expect(run.stdout + run.stderr).toMatch(
      /"level":"warn".*Database__PoolSise.*did you mean `Database:PoolSize`\?/,
    );
  });

  test("Production API: a secret and its _FILE both set is refused naming both, never the value", async () => {
    const dir = mkdtempSync(join(tmpdir(), "plinth-file-secret-"));
    const value = randomBytes(32).toString("base64");
    writeFileSync(join(dir, "key"), `${value}\n`);
    const run = await runEntry(
      "src/server.ts",
      [],
      validProductionEnv({ PLINTH_TENANT_SECRET_MASTER_KEY_FILE: join(dir, "key") }),
    );
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toContain("PLINTH_TENANT_SECRET_MASTER_KEY and PLINTH_TENANT_SECRET_MASTER_KEY_FILE");
    expect(run.stdout + run.stderr).not.toContain(value);
  });
});
