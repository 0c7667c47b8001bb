import { createHash } from "node:crypto";
import type { Clock } from "../clock.ts";
import type { Settings } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { CounterStore, WindowMode, WindowSpec } from "./counter-store.ts";

/**
 * Security windows: attempts counted per subject (account or phone) and per client IP.
 *
 * How an endpoint uses them (login shown; SMS send/verify alike with `phone`):
 *   1. Before looking anything up: `assertAllowed(await windows.consume("password", { account, ip }))`.
 *      `account` is the identifier as submitted (tenant id + normalised e-mail), whether or not
 *      such an account exists, so a lockout (429) never tells whether it does.
 *   2. Verify the password. On failure answer the usual 401 (the attempt is already counted).
 *   3. On success: `windows.reset("password", { account })`. Windows that count failures only
 *      (the password IP window) are consumed up front too and given back on success with
 *      `windows.refund(kind, { ip }, decision.recordedAtMs)`: reserve, then settle.
 * `consume` checks and records in one atomic step, so parallel guesses cannot overshoot the limit.
 * When the counter store is unreachable every method throws a 503 `unavailable` problem: the
 * endpoint fails closed rather than allowing unlimited attempts.
 */
export type WindowKind = "password" | "smsSend" | "smsVerify";

export interface WindowSubjects {
  /** Password windows: the account identifier as submitted. */
  account?: string;
  /** SMS windows: the phone number as submitted. */
  phone?: string;
  /** The client IP (see http/client-ip.ts). */
  ip?: string;
}

export interface WindowDecision {
  allowed: boolean;
  /** Whole seconds until an attempt is accepted again; 0 when allowed. */
  retryAfterSeconds: number;
  /** When this call recorded an attempt: the time it was recorded at, to hand to `refund`. */
  recordedAtMs?: number;
}

export interface SecurityWindows {
  /** Would an attempt be accepted now? Records nothing. */
  check(kind: WindowKind, subjects: WindowSubjects): Promise<WindowDecision>;
  /** Records an attempt (e.g. a failure) unconditionally; `allowed` tells whether it was under the limit. */
  hit(kind: WindowKind, subjects: WindowSubjects): Promise<WindowDecision>;
  /** Records an attempt only if every window allows it: the atomic check-and-count to use before work. */
  consume(kind: WindowKind, subjects: WindowSubjects): Promise<WindowDecision>;
  /** Clears the subject's window (not the IP's): after a successful login or verification. */
  reset(kind: WindowKind, subjects: Omit<WindowSubjects, "ip">): Promise<void>;
  /**
   * Takes back the attempt a `consume` recorded (its `recordedAtMs`) on the given subjects' windows:
   * reserve up front, give the permit back when the attempt turns out not to count (the password
   * IP window counts failures only, yet parallel guesses cannot overshoot it).
   */
  refund(kind: WindowKind, subjects: WindowSubjects, recordedAtMs: number): Promise<void>;
}

interface Limits {
  subject: "account" | "phone";
  limit: number;
  ipLimit: number;
  windowSeconds: number;
}

export function windowLimits(settings: Settings): Record<WindowKind, Limits> {
  const { Password, Sms } = settings.Authentication;
  return {
    password: {
      subject: "account",
      limit: Password.AttemptLimit,
      ipLimit: Password.IpAttemptLimit,
      windowSeconds: Password.AttemptWindowSeconds,
    },
    smsSend: {
      subject: "phone",
      limit: Sms.SendLimit,
      ipLimit: Sms.IpSendLimit,
      windowSeconds: Sms.SendWindowSeconds,
    },
    smsVerify: {
      subject: "phone",
      limit: Sms.VerifyLimit,
      ipLimit: Sms.IpVerifyLimit,
      windowSeconds: Sms.VerifyWindowSeconds,
    },
  };
}

/** Identifiers are hashed: cache keys and table rows never hold an e-mail or phone number. */
function subjectHash(value: string): string {
  return createHash("sha256").update(value.trim().toLowerCase()).digest("hex").slice(0, 32);
}

export function windowKey(kind: WindowKind, dimension: "account" | "phone" | "ip", value: string): string {
  return `win:${kind}:${dimension}:${dimension === "ip" ? value : subjectHash(value)}`;
}

export function createSecurityWindows(input: {
  store: CounterStore;
  settings: Settings;
  clock: Clock;
  logger: Logger;
}): SecurityWindows {
  const limits = windowLimits(input.settings);

  const specs = (kind: WindowKind, subjects: WindowSubjects): WindowSpec[] => {
    const l = limits[kind];
    const windowMs = l.windowSeconds * 1000;
    const out: WindowSpec[] = [];
    const subject = subjects[l.subject];
    if (subject) out.push({ key: windowKey(kind, l.subject, subject), limit: l.limit, windowMs });
    if (subjects.ip) out.push({ key: windowKey(kind, "ip", subjects.ip), limit: l.ipLimit, windowMs });
    if (out.length === 0) throw new Error(`security window "${kind}" needs a ${l.subject} or an ip`);
    return out;
  };

  const unavailable = (kind: WindowKind, error: unknown): AppError => {
    input.logger.error("security window store unavailable; failing closed", {
      window: kind,
      store: input.store.kind,
      error, // the logger describes it; a failed query's parameter values never show
    });
    return new AppError("unavailable", "Temporarily unavailable, try again shortly.", {
      retryAfterSeconds: 5,
    });
  };

  const run = async (
    mode: WindowMode,
    kind: WindowKind,
    subjects: WindowSubjects,
  ): Promise<WindowDecision> => {
    const windows = specs(kind, subjects);
    const nowMs = input.clock.now().getTime();
    try {
      const outcome = await input.store.window(mode, windows, nowMs);
      const decision: WindowDecision = {
        allowed: outcome.allowed,
        retryAfterSeconds: outcome.allowed ? 0 : Math.max(1, Math.ceil(outcome.retryAfterMs / 1000)),
      };
      if (mode === "hit" || (mode === "consume" && outcome.allowed)) decision.recordedAtMs = nowMs;
      return decision;
    } catch (error) {
      throw unavailable(kind, error);
    }
  };

  return {
    check: (kind, subjects) => run("check", kind, subjects),
    hit: (kind, subjects) => run("hit", kind, subjects),
    consume: (kind, subjects) => run("consume", kind, subjects),
    reset: async (kind, subjects) => {
      const l = limits[kind];
      const subject = subjects[l.subject];
      if (!subject) return;
      try {
        await input.store.resetWindows([windowKey(kind, l.subject, subject)]);
      } catch (error) {
        throw unavailable(kind, error);
      }
    },
    refund: async (kind, subjects, recordedAtMs) => {
      const keys = specs(kind, subjects).map((spec) => spec.key);
      try {
        await input.store.refundWindows(keys, recordedAtMs);
      } catch (error) {
        throw unavailable(kind, error);
      }
    },
  };
}

/** Throws the 429 problem for a refused attempt: the same body whether or not the account exists. */
export function assertAllowed(decision: WindowDecision): void {
  if (decision.allowed) return;
  throw new AppError("rate_limited", "Too many attempts. Try again later.", {
    retryAfterSeconds: Math.max(decision.retryAfterSeconds, 1),
  });
}
