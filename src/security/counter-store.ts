import { inArray, lt, sql } from "drizzle-orm";
import type { Cache } from "../cache/index.ts";
import { gcraScript, slidingLogRefundScript, slidingLogScript } from "../cache/scripts.ts";
import { CLOCK_STEP_BACK_MS } from "../clock.ts";
import { type Db, execute } from "../db/client.ts";
import { securityCounters } from "../db/schema/security.ts";
import { gcraGranted, gcraOutcomes, gcraParams, gcraStart } from "./gcra.ts";

/**
 * One sliding window: at most `limit` attempts in any `windowMs`. With `slow`, from the `after`-th
 * attempt in the window on, each further attempt must also come at least
 * min(`maxMs`, `baseMs` * 2^(count - after)) after the newest one: an increasing delay. A window
 * that should only slow down, never refuse outright, has a `limit` of `NO_HARD_LIMIT`.
 */
export interface WindowSpec {
  key: string;
  limit: number;
  windowMs: number;
  slow?: { after: number; baseMs: number; maxMs: number };
}

/** The `limit` of a window that slows attempts down but never refuses them for the whole window. */
export const NO_HARD_LIMIT = Number.MAX_SAFE_INTEGER;

export type WindowMode = "check" | "hit" | "consume";

export interface WindowOutcome {
  /** Every window was under its limit (for `hit`: before this attempt). */
  allowed: boolean;
  /** When `allowed` is false: how long until every window accepts an attempt again. */
  retryAfterMs: number;
  /** Attempts inside each window after the operation, in `specs` order. */
  counts: number[];
  /** How long each window (in `specs` order) refuses an attempt from now, in ms; 0 when it allows. */
  waits: number[];
}

export interface RateOutcome {
  allowed: boolean;
  /** Permits left right now. */
  remaining: number;
  /** Until the full quota is back. */
  resetMs: number;
  /** When refused: until the next permit. */
  retryAfterMs: number;
}

/**
 * Where security windows and rate limits keep their counters: the cache (always when one is
 * configured), else the database (`security_counters`, so several processes agree), or this
 * process's memory when the database is embedded PGlite (one process by construction). Every operation
 * is atomic across its keys; "now" comes from the caller's clock.
 */
export interface CounterStore {
  readonly kind: "cache" | "database" | "memory";
  window(mode: WindowMode, specs: WindowSpec[], nowMs: number): Promise<WindowOutcome>;
  resetWindows(keys: string[]): Promise<void>;
  /**
   * Takes back one attempt recorded at `atMs` (by `window`) on each key: reserve-then-settle, for a
   * window that should count only attempts that turn out to fail. Atomic per key.
   */
  refundWindows(keys: string[], atMs: number): Promise<void>;
  /**
   * `count` requests at `nowMs` against a token bucket of `limit` permits refilled over `windowMs`
   * (GCRA), in one atomic step: outcome i is what the i-th of `count` requests made one after
   * another would get (`gcraOutcomes`).
   */
  rate(key: string, limit: number, windowMs: number, nowMs: number, count: number): Promise<RateOutcome[]>;
}

export function cacheCounterStore(cache: Cache): CounterStore {
  const runWindows = async (
    mode: WindowMode,
    specs: WindowSpec[],
    nowMs: number,
    member: string,
  ): Promise<WindowOutcome> => {
    const args: (string | number)[] = [nowMs, mode, member];
    for (const spec of specs) {
      const slow = spec.slow ?? { after: 0, baseMs: 0, maxMs: 0 };
      args.push(spec.limit, spec.windowMs, slow.after, slow.baseMs, slow.maxMs);
    }
    const out = (await cache.run(
      slidingLogScript,
      specs.map((s) => s.key),
      args,
    )) as number[];
    const n = specs.length;
    return {
      allowed: Number(out[0]) === 1,
      retryAfterMs: Number(out[1] ?? 0),
      counts: out.slice(2, 2 + n).map(Number),
      waits: out.slice(2 + n, 2 + 2 * n).map(Number),
    };
  };
  const refund = async (keys: string[], atMs: number) => {
    if (keys.length === 0) return;
    if (!cache.cluster) await cache.run(slidingLogRefundScript, keys, [atMs]);
    else await Promise.all(keys.map((key) => cache.run(slidingLogRefundScript, [key], [atMs])));
  };
  return {
    kind: "cache",
    window: async (mode, specs, nowMs) => {
      const member = `${nowMs}:${crypto.randomUUID()}`;
      if (!cache.cluster || specs.length <= 1) return runWindows(mode, specs, nowMs, member);
      // On a Redis Cluster each window is a slot of its own (its hash tag), and one script cannot
      // span slots: every window is decided by its own script, all in one round trip. Each script
      // keeps its own window exact (none admits past its limit); `consume` records only when all
      // allow, so what it recorded on the windows that allowed is taken back when another refused.
      const outcomes = await Promise.all(specs.map((spec) => runWindows(mode, [spec], nowMs, member)));
      const outcome = combineOutcomes(outcomes);
      if (mode !== "consume" || outcome.allowed) return outcome;
      const recorded = specs.filter((_, i) => outcomes[i]?.allowed).map((spec) => spec.key);
      await refund(recorded, nowMs);
      return {
        ...outcome,
        counts: outcome.counts.map((count, i) => (outcomes[i]?.allowed ? count - 1 : count)),
      };
    },
    resetWindows: async (keys) => {
      await cache.del(...keys);
    },
    refundWindows: refund,
    rate: async (key, limit, windowMs, nowMs, count) => {
      const { windowUs, intervalUs } = gcraParams(limit, windowMs);
      const out = (await cache.run(
        gcraScript,
        [key],
        [nowMs * 1000, intervalUs, windowUs, count],
      )) as number[];
      return gcraOutcomes(count, Number(out[0] ?? 0), Number(out[1] ?? 0), intervalUs, windowUs);
    },
  };
}

/** One outcome over windows decided one by one, in `specs` order. */
/** The outcome alone, without what a store kept beside it to write back. */
function windowOutcomeOf({ allowed, retryAfterMs, counts, waits }: WindowOutcome): WindowOutcome {
  return { allowed, retryAfterMs, counts, waits };
}

function combineOutcomes(outcomes: WindowOutcome[]): WindowOutcome {
  return {
    allowed: outcomes.every((o) => o.allowed),
    retryAfterMs: Math.max(0, ...outcomes.map((o) => o.retryAfterMs)),
    counts: outcomes.flatMap((o) => o.counts),
    waits: outcomes.flatMap((o) => o.waits),
  };
}

/**
 * The sliding-log decision, the same as the cache's script, on the hits of each window; a hit
 * stamped more than `CLOCK_STEP_BACK_MS` ahead of `nowMs` counts as made at `nowMs`.
 */
export function decideWindows(
  mode: WindowMode,
  specs: WindowSpec[],
  hits: number[][],
  nowMs: number,
): WindowOutcome & { next: number[][] | null } {
  const live = specs.map((spec, i) =>
    (hits[i] ?? [])
      .filter((at) => at > nowMs - spec.windowMs)
      .map((at) => (at - nowMs > CLOCK_STEP_BACK_MS ? nowMs : at))
      .sort((a, b) => a - b),
  );
  const waits = specs.map((spec, i) => {
    const inWindow = live[i] ?? [];
    const count = inWindow.length;
    if (count >= spec.limit) {
      const oldest = inWindow[count - spec.limit] ?? nowMs;
      return Math.ceil(oldest + spec.windowMs - nowMs);
    }
    if (spec.slow && spec.slow.after > 0 && count >= spec.slow.after) {
      const delay = Math.min(spec.slow.maxMs, spec.slow.baseMs * 2 ** (count - spec.slow.after));
      return Math.max(0, Math.ceil((inWindow.at(-1) ?? nowMs) + delay - nowMs));
    }
    return 0;
  });
  const blocked = waits.some((wait) => wait > 0);
  const record = mode === "hit" || (mode === "consume" && !blocked);
  const next = record ? live.map((inWindow) => [...inWindow, nowMs]) : mode === "check" ? null : live;
  return {
    allowed: !blocked,
    retryAfterMs: Math.max(0, ...waits),
    counts: (next ?? live).map((inWindow) => inWindow.length),
    waits,
    next,
  };
}

const numbers = (text: string | null): number[] => (text ? text.split(",").map(Number) : []);
const bigintArray = (values: number[]) => `{${values.map((v) => Math.trunc(v)).join(",")}}`;

/**
 * Counters in PostgreSQL (or PGlite): each operation is one transaction that locks its rows in key
 * order, so concurrent processes on the same database serialise per key.
 */
export function databaseCounterStore(db: Db, options: { cleanupEvery?: number } = {}): CounterStore {
  const cleanupEvery = options.cleanupEvery ?? 200;
  let calls = 0;
  // housekeeping after an operation has committed: a failed sweep must not fail that operation
  // (its permits or attempts are already recorded); the next sweep, cleanupEvery calls on, retries
  const maybeCleanup = async (nowMs: number) => {
    if (++calls % cleanupEvery !== 0) return;
    await db
      .delete(securityCounters)
      .where(lt(securityCounters.expiresAt, new Date(nowMs)))
      .catch(() => undefined);
  };
  const lockRow = async (tx: Db, key: string, nowMs: number) => {
    const [row] = await execute<{ hits: string | null; tat: string | null }>(
      tx,
      sql`insert into security_counters (key, expires_at) values (${key}, ${new Date(nowMs).toISOString()})
          on conflict (key) do update set key = excluded.key
          returning array_to_string(hits, ',') as hits, tat::text as tat`,
    );
    return { hits: numbers(row?.hits ?? null), tat: row?.tat ? Number(row.tat) : null };
  };

  return {
    kind: "database",
    window: async (mode, specs, nowMs) => {
      const order = specs
        .map((spec, i) => ({ spec, i }))
        .sort((a, b) => a.spec.key.localeCompare(b.spec.key));
      const outcome = await db.transaction(async (tx) => {
        const hits: number[][] = [];
        for (const { spec, i } of order) hits[i] = (await lockRow(tx as unknown as Db, spec.key, nowMs)).hits;
        const decision = decideWindows(mode, specs, hits, nowMs);
        if (decision.next) {
          for (const [i, spec] of specs.entries()) {
            const kept = decision.next[i] ?? [];
            const expiresAt = new Date((kept.at(-1) ?? nowMs) + spec.windowMs).toISOString();
            await execute(
              tx,
              sql`update security_counters set hits = ${bigintArray(kept)}::bigint[], expires_at = ${expiresAt}
                  where key = ${spec.key}`,
            );
          }
        }
        return decision;
      });
      await maybeCleanup(nowMs);
      return windowOutcomeOf(outcome);
    },
    resetWindows: async (keys) => {
      if (keys.length > 0) await db.delete(securityCounters).where(inArray(securityCounters.key, keys));
    },
    refundWindows: async (keys, atMs) => {
      // one statement per key: the row lock makes removing one occurrence of `atMs` atomic
      for (const key of keys) {
        await execute(
          db,
          sql`update security_counters
              set hits = hits[:array_position(hits, ${Math.trunc(atMs)}::bigint) - 1]
                || hits[array_position(hits, ${Math.trunc(atMs)}::bigint) + 1:]
              where key = ${key} and array_position(hits, ${Math.trunc(atMs)}::bigint) is not null`,
        );
      }
    },
    rate: async (key, limit, windowMs, nowMs, count) => {
      const { windowUs, intervalUs } = gcraParams(limit, windowMs);
      const nowUs = nowMs * 1000;
      const result = await db.transaction(async (tx) => {
        const row = await lockRow(tx as unknown as Db, key, nowMs);
        const tat = gcraStart(row.tat, nowUs, windowUs);
        const granted = gcraGranted(count, tat - nowUs, intervalUs, windowUs);
        if (granted > 0) {
          const next = tat + granted * intervalUs;
          await execute(
            tx,
            sql`update security_counters set tat = ${next}, expires_at = ${new Date(next / 1000).toISOString()}
                where key = ${key}`,
          );
        }
        return gcraOutcomes(count, granted, tat - nowUs, intervalUs, windowUs);
      });
      await maybeCleanup(nowMs);
      return result;
    },
  };
}

/**
 * Counters in this process only: for embedded PGlite, whose data directory one process holds at a
 * time, so there is no second process to disagree with. Expired entries are swept as they are met.
 */
export function memoryCounterStore(): CounterStore {
  const logs = new Map<string, { hits: number[]; expiresAt: number }>();
  const tats = new Map<string, number>();
  let calls = 0;
  const sweep = (nowMs: number) => {
    if (++calls % 500 !== 0) return;
    for (const [key, entry] of logs) if (entry.expiresAt <= nowMs) logs.delete(key);
    for (const [key, tat] of tats) if (tat <= nowMs * 1000) tats.delete(key);
  };
  return {
    kind: "memory",
    window: async (mode, specs, nowMs) => {
      sweep(nowMs);
      const decision = decideWindows(
        mode,
        specs,
        specs.map((spec) => logs.get(spec.key)?.hits ?? []),
        nowMs,
      );
      if (decision.next) {
        for (const [i, spec] of specs.entries()) {
          const hits = decision.next[i] ?? [];
          logs.set(spec.key, { hits, expiresAt: (hits.at(-1) ?? nowMs) + spec.windowMs });
        }
      }
      return windowOutcomeOf(decision);
    },
    resetWindows: async (keys) => {
      for (const key of keys) logs.delete(key);
    },
    refundWindows: async (keys, atMs) => {
      for (const key of keys) {
        const entry = logs.get(key);
        const at = entry?.hits.indexOf(atMs) ?? -1;
        if (entry && at >= 0) entry.hits.splice(at, 1);
      }
    },
    rate: async (key, limit, windowMs, nowMs, count) => {
      sweep(nowMs);
      const { windowUs, intervalUs } = gcraParams(limit, windowMs);
      const nowUs = nowMs * 1000;
      const tat = gcraStart(tats.get(key), nowUs, windowUs);
      const granted = gcraGranted(count, tat - nowUs, intervalUs, windowUs);
      if (granted > 0) tats.set(key, tat + granted * intervalUs);
      return gcraOutcomes(count, granted, tat - nowUs, intervalUs, windowUs);
    },
  };
}
