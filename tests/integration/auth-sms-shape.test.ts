import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { smsCodes } from "../../src/db/schema/index.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createTenant, createUser, json } from "../helpers/identity.ts";

/**
 * #16 point 7: a wrong SMS code costs the same work whether or not the number has an account (and
 * an open code). The robust part: the same database statements per attempt, counted by the query
 * observer. The measured part: 200 interleaved tries each, medians within a tolerance wide enough for
 * a shared machine (the leak found was one extra statement, ~0.7 ms).
 */
const clock = new ManualClock("2026-11-23T10:00:00Z");
const app = useTestApp({
  clock,
  cache: "sms-shape",
  settings: relaxedLimits,
  env: {
    Authentication__Sms__VerifyLimit: "100000",
    Authentication__Sms__IpVerifyLimit: "100000",
  },
});
const t = app.testDatabase;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

describe("SMS verification has one shape", () => {
  test("a wrong code for a registered number and for an unknown one: same statements, same time", async () => {
    const tenant = await createTenant(t.database.db);
    const registered = "+14155550123";
    const unknown = "+14155550124";
    await createUser(t.database.db, tenant.id, { phone: registered });
    // an open code for the registered number whose hash no six digits match
    await t.database.db.insert(smsCodes).values({
      tenantId: tenant.id,
      phone: registered,
      codeHash: "not-a-code-hash",
      createdAt: clock.now(),
      expiresAt: new Date(clock.now().getTime() + 3_600_000),
    });
    let statements: string[] = [];
    app.deps.database.setQueryObserver({
      observe: (statement, run) => {
        statements.push(statement.replace(/\s+/g, " "));
        return run();
      },
    });
    const attempt = async (phone: string) => {
      statements = [];
      const started = performance.now();
      const response = await app.request(
        "/api/auth/sms/verify",
        json({ phone, code: "123456", tenant: tenant.code }),
        "198.51.100.5",
      );
      const ms = performance.now() - started;
      expect(response.status).toBe(401);
      await response.arrayBuffer();
      return { ms, statements: [...statements] };
    };
    try {
      // warm up both paths (statement preparation, JIT)
      for (let i = 0; i < 20; i++) {
        await attempt(registered);
        await attempt(unknown);
      }
      const times = { registered: [] as number[], unknown: [] as number[] };
      const shapes = { registered: new Set<string>(), unknown: new Set<string>() };
      for (let i = 0; i < 200; i++) {
        // interleaved, alternating which goes first, so load drifts hit both alike
        const order = i % 2 ? (["registered", "unknown"] as const) : (["unknown", "registered"] as const);
        for (const which of order) {
          const { ms, statements: seen } = await attempt(which === "registered" ? registered : unknown);
          times[which].push(ms);
          shapes[which].add(JSON.stringify(seen));
        }
      }
      // the same statements, in the same order, every time, for both
      expect(shapes.registered.size).toBe(1);
      expect([...shapes.unknown]).toEqual([...shapes.registered]);
      const seen = JSON.parse([...shapes.registered][0] ?? "[]") as string[];
      // the transaction opens with BEGIN and the tenant's context in one message (`begin; select set_config`)
      expect(seen.map((statement) => statement.split(/[ ;]/)[0]?.toLowerCase())).toEqual([
        "select",
        "begin",
        "set",
        "update",
      ]);

      const [a, b] = [median(times.registered), median(times.unknown)];
      // within 0.3 ms or 30 % of the slower median, whichever is larger
      expect(Math.abs(a - b)).toBeLessThan(Math.max(0.3, 0.3 * Math.max(a, b)));
    } finally {
      app.deps.database.setQueryObserver(undefined);
    }
  }, 120_000);
});
