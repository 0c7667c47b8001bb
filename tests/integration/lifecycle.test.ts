import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { createSafeMessage, type RuntimeAdapter, runApi, type StopSignal } from "../../src/lifecycle.ts";
import { testConfig, useTestDatabase } from "../helpers/app.ts";
import { appRoleEnv } from "../helpers/database.ts";
import { waitFor } from "../helpers/jobs.ts";

/** The shared start-up and drain sequence (src/lifecycle.ts) with a fake runtime adapter. */
const t = useTestDatabase();

function fakeRuntime() {
  const calls: string[] = [];
  const exits: number[] = [];
  let signal: ((s: StopSignal) => void) | undefined;
  const runtime: RuntimeAdapter = {
    listeningFields: { runtime: "fake" },
    async serve(app, _deps, port) {
      calls.push(`serve:${port}`);
      expect((await app.request("/api/health")).status).toBe(200);
      return {
        port: 4321,
        drain: async () => void calls.push("drain"),
        close: async () => void calls.push("close"),
      };
    },
    onSignal: (handler) => {
      signal = handler;
    },
    // a real exit ends the process here; the fake only records it
    exit: (code) => {
      exits.push(code);
      return undefined as never;
    },
  };
  return { runtime, calls, exits, signal: (s: StopSignal) => signal?.(s) };
}

const env = () => ({
  env: { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: t.url, PORT: "0", Logging__Level: "error" },
  configDir: "/nonexistent",
});

test("serves, then on a signal drains requests and loops and resolves exit code 0", async () => {
  const fake = fakeRuntime();
  const exited = runApi(fake.runtime, { config: env() });
  await waitFor(() => fake.calls.includes("serve:0"), { what: "the server to be started" });
  fake.signal("SIGTERM");
  expect(await exited).toBe(0);
  expect(fake.calls).toEqual(["serve:0", "drain"]);
});

test("a signal before serving ends the process at once with 143 (SIGTERM) or 130 (SIGINT)", async () => {
  for (const [signal, code] of [
    ["SIGTERM", 143],
    ["SIGINT", 130],
  ] as const) {
    const fake = fakeRuntime();
    // the signal arrives while preparing (Bun's --migrate), before anything serves
    const exited = runApi(fake.runtime, {
      config: env(),
      prepare: async () => {
        fake.signal(signal);
        return 0;
      },
    });
    expect(fake.exits).toEqual([]);
    expect(await exited).toBe(0); // the fake exit returned, so the process went on and drained
    expect(fake.exits).toEqual([code]);
  }
});

test("background loops that fail to start stop the process with 1 (after a drain), not serve without them", async () => {
  const fake = fakeRuntime();
  // the schedules loop seeds its schedules as it starts: refused to the API's role, the start fails
  const role = new URL(appRoleEnv(t.url).DATABASE_URL ?? "").username;
  await t.database.db.execute(sql.raw(`revoke insert on job_schedules from "${role}"`));
  try {
    const exited = runApi(fake.runtime, {
      config: {
        env: { PLINTH_ENVIRONMENT: "Development", ...appRoleEnv(t.url), PORT: "0", Logging__Level: "error" },
        configDir: "/nonexistent",
      },
    });
    expect(await exited).toBe(1);
    expect(fake.calls).toEqual(["serve:0", "drain"]);
  } finally {
    await t.database.db.execute(sql.raw(`grant insert on job_schedules to "${role}"`));
  }
});

test("a non-zero prepare code (a failed --migrate) ends start-up with that code, before serving", async () => {
  const fake = fakeRuntime();
  expect(await runApi(fake.runtime, { config: env(), prepare: async () => 3 })).toBe(3);
  expect(fake.calls).toEqual([]);
});

test("invalid configuration ends start-up with 1", async () => {
  const fake = fakeRuntime();
  const config = {
    env: { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: t.url, PORT: "nope" },
    configDir: "/nonexistent",
  };
  expect(await runApi(fake.runtime, { config })).toBe(1);
  expect(fake.calls).toEqual([]);
});

test("createSafeMessage cuts every configured secret out of a start-up failure", () => {
  const config = testConfig({
    settings: { "Security:Jwt:SigningKey": "a-signing-key-value-0123456789abcdef" },
  });
  const secret = config.secretValues.find((s) => s.length >= 4);
  expect(secret).toBeDefined();
  const message = createSafeMessage(config, new Error(`could not connect with ${secret}`));
  expect(message).toBe("could not connect with [REDACTED]");
});
