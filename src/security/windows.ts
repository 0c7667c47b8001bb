import { createHash } from "node:crypto";
import { slotKey } from "../cache/port.ts";
import type { Clock } from "../clock.ts";
import type { Settings } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import type { Logger } from "../telemetry/logger.ts";
import { type CounterStore, NO_HARD_LIMIT, type WindowMode, type WindowSpec } from "./counter-store.ts";

/**
 * Security windows: attempts counted per subject (account or phone), per client IP and, for
 * passwords, per account and client IP together.
 *
 * The password windows (`src/auth/password-sign-in.ts` `passwordAttempt`):
 *   - `password-address`: one account from one client address. Every attempt counts and a success
 *     from that address clears it. From the 4th attempt on each must wait 1 s, then 2 s… after the
 *     previous one (slowed); at `AttemptLimit` (5) the address is refused for the rest of the
 *     `AttemptWindowSeconds` (900). Only the address that failed is refused.
 *   - `password-account`: one account from every address. Never a hard lock: past
 *     `AccountAttemptLimit` (100) attempts in the window each further attempt must wait
 *     1 s, 2 s, 4 s… after the previous one, at most `AccountMaxDelaySeconds` (60). A success clears it.
 *   - `password-ip`: one client address across accounts, failures only (`IpAttemptLimit`).
 * SMS send and verify count per phone and per IP (`sms-send-*`, `sms-verify-*`); password reset
 * requests per account asked for and per IP (`reset-account`, `reset-ip`); e-mail sign-in codes per
 * account (tenant id + address) and per IP (`email-code-send-*`, `email-code-verify-*`); second-factor
 * codes per user and per IP (`mfa-verify-user`, `mfa-verify-ip`: the sign-in step and step-up).
 *
 * How an endpoint uses them:
 *   1. Before looking anything up: `assertAllowed(await windows.consume("password", { account, ip }))`.
 *      `account` is the identifier as submitted (tenant id + normalised e-mail), whether or not
 *      such an account exists, so a refusal (429) never tells whether it does.
 *   2. Verify the password. On failure answer the usual 401 (the attempt is already counted).
 *   3. On success: `windows.reset("password", { account, ip })` (the account's windows, never the
 *      IP's own). Windows that count failures only (the password IP window) are consumed up front
 *      too and given back on success with `windows.refund(kind, { ip }, decision.recordedAtMs)`.
 * `consume` checks and records in one atomic step, so parallel guesses cannot overshoot the limit.
 * A refusal names its window (`refusedBy`): each window is an advertised rate-limit policy
 * (`windowPolicies`), which the HTTP edge lists in `RateLimit-Policy` and names in the 429's
 * `RateLimit`. When the counter store is unreachable every method throws a 503 `unavailable`
 * problem: the endpoint fails closed rather than allowing unlimited attempts.
 */
export type WindowKind =
  | "password"
  | "passwordReset"
  | "signUp"
  | "smsSend"
  | "smsVerify"
  | "emailCodeSend"
  | "emailCodeVerify"
  | "mfaVerify";

export interface WindowSubjects {
  /** Password windows: the account identifier as submitted. */
  account?: string;
  /** SMS windows: the phone number as submitted. */
  phone?: string;
  /** The client IP (see http/client-ip.ts). */
  ip?: string;
}

/** A window as an advertised rate-limit policy: its name, limit and window length. */
export interface WindowPolicy {
  name: string;
  limit: number;
  windowSeconds: number;
}

export interface WindowDecision {
  allowed: boolean;
  /** Whole seconds until an attempt is accepted again; 0 when allowed. */
  retryAfterSeconds: number;
  /** When this call recorded an attempt: the time it was recorded at, to hand to `refund`. */
  recordedAtMs?: number;
  /** When refused: the window that refused longest (the policy the 429 names). */
  refusedBy?: WindowPolicy;
}

export interface SecurityWindows {
  /** Would an attempt be accepted now? Records nothing. */
  check(kind: WindowKind, subjects: WindowSubjects): Promise<WindowDecision>;
  /** Records an attempt (e.g. a failure) unconditionally; `allowed` tells whether it was under the limit. */
  hit(kind: WindowKind, subjects: WindowSubjects): Promise<WindowDecision>;
  /** Records an attempt only if every window allows it: the atomic check-and-count to use before work. */
  consume(kind: WindowKind, subjects: WindowSubjects): Promise<WindowDecision>;
  /**
   * Clears the subject's windows, never the IP's own: after a successful sign-in or verification.
   * For passwords the account's window and, given `ip`, that address's window on the account.
   */
  reset(kind: WindowKind, subjects: WindowSubjects): Promise<void>;
  /**
   * Takes back the attempt a `consume` recorded (its `recordedAtMs`) on the given subjects' windows:
   * reserve up front, give the permit back when the attempt turns out not to count (the password
   * IP window counts failures only, yet parallel guesses cannot overshoot it).
   */
  refund(kind: WindowKind, subjects: WindowSubjects, recordedAtMs: number): Promise<void>;
}

type Dimension = "account" | "account-ip" | "phone" | "ip";

interface WindowLimit extends WindowPolicy {
  dimension: Dimension;
  /** Only slows down (`slow`), never refuses for the rest of the window. */
  soft?: true;
  slow?: { after: number; baseMs: number; maxMs: number };
}

/** The password-address window slows an address down from this many attempts on. */
export const ADDRESS_SLOW_AFTER = 3;

/** Every window of each kind, in the order they are checked (and advertised). */
export function windowLimits(settings: Settings): Record<WindowKind, WindowLimit[]> {
  const { Password, PasswordReset, Sms, EmailSignIn, Mfa } = settings.Authentication;
  return {
    password: [
      {
        name: "password-address",
        dimension: "account-ip",
        limit: Password.AttemptLimit,
        windowSeconds: Password.AttemptWindowSeconds,
        slow: { after: ADDRESS_SLOW_AFTER, baseMs: 1000, maxMs: Password.AttemptWindowSeconds * 1000 },
      },
      {
        name: "password-account",
        dimension: "account",
        soft: true,
        limit: Password.AccountAttemptLimit,
        windowSeconds: Password.AttemptWindowSeconds,
        slow: {
          after: Password.AccountAttemptLimit,
          baseMs: 1000,
          maxMs: Password.AccountMaxDelaySeconds * 1000,
        },
      },
      {
        name: "password-ip",
        dimension: "ip",
        limit: Password.IpAttemptLimit,
        windowSeconds: Password.AttemptWindowSeconds,
      },
    ],
    passwordReset: [
      {
        name: "reset-account",
        dimension: "account",
        limit: PasswordReset.SendLimit,
        windowSeconds: PasswordReset.SendWindowSeconds,
      },
      {
        name: "reset-ip",
        dimension: "ip",
        limit: PasswordReset.IpSendLimit,
        windowSeconds: PasswordReset.SendWindowSeconds,
      },
    ],
    signUp: [
      {
        name: "signup-domain",
        dimension: "account",
        limit: settings.Tenancy.SignUp.DomainLimit,
        windowSeconds: settings.Tenancy.SignUp.WindowSeconds,
      },
      {
        name: "signup-ip",
        dimension: "ip",
        limit: settings.Tenancy.SignUp.IpLimit,
        windowSeconds: settings.Tenancy.SignUp.WindowSeconds,
      },
    ],
    emailCodeSend: [
      {
        name: "email-code-send-account",
        dimension: "account",
        limit: EmailSignIn.SendLimit,
        windowSeconds: EmailSignIn.SendWindowSeconds,
      },
      {
        name: "email-code-send-ip",
        dimension: "ip",
        limit: EmailSignIn.IpSendLimit,
        windowSeconds: EmailSignIn.SendWindowSeconds,
      },
    ],
    emailCodeVerify: [
      {
        name: "email-code-verify-account",
        dimension: "account",
        limit: EmailSignIn.VerifyLimit,
        windowSeconds: EmailSignIn.VerifyWindowSeconds,
      },
      {
        name: "email-code-verify-ip",
        dimension: "ip",
        limit: EmailSignIn.IpVerifyLimit,
        windowSeconds: EmailSignIn.VerifyWindowSeconds,
      },
    ],
    smsSend: [
      {
        name: "sms-send-phone",
        dimension: "phone",
        limit: Sms.SendLimit,
        windowSeconds: Sms.SendWindowSeconds,
      },
      { name: "sms-send-ip", dimension: "ip", limit: Sms.IpSendLimit, windowSeconds: Sms.SendWindowSeconds },
    ],
    smsVerify: [
      {
        name: "sms-verify-phone",
        dimension: "phone",
        limit: Sms.VerifyLimit,
        windowSeconds: Sms.VerifyWindowSeconds,
      },
      {
        name: "sms-verify-ip",
        dimension: "ip",
        limit: Sms.IpVerifyLimit,
        windowSeconds: Sms.VerifyWindowSeconds,
      },
    ],
    mfaVerify: [
      {
        name: "mfa-verify-user",
        dimension: "account",
        limit: Mfa.VerifyLimit,
        windowSeconds: Mfa.VerifyWindowSeconds,
      },
      {
        name: "mfa-verify-ip",
        dimension: "ip",
        limit: Mfa.IpVerifyLimit,
        windowSeconds: Mfa.VerifyWindowSeconds,
      },
    ],
  };
}

/** The windows of a kind as advertised policies (`RateLimit-Policy`). */
export function windowPolicies(settings: Settings, kind: WindowKind): WindowPolicy[] {
  return windowLimits(settings)[kind].map(({ name, limit, windowSeconds }) => ({
    name,
    limit,
    windowSeconds,
  }));
}

/** Identifiers are hashed: cache keys and table rows never hold an e-mail or phone number. */
function subjectHash(value: string): string {
  return createHash("sha256").update(value.trim().toLowerCase()).digest("hex").slice(0, 32);
}

export function windowKey(kind: WindowKind, dimension: Dimension, value: string): string {
  // one window is one key; its hash tag spreads windows over a Redis Cluster's slots
  return slotKey(`win:${kind}:${dimension}:`, dimension === "ip" ? value : subjectHash(value));
}

/** The value a window of `dimension` counts under, or undefined when the subjects lack it. */
function subjectOf(dimension: Dimension, subjects: WindowSubjects): string | undefined {
  if (dimension === "account-ip")
    return subjects.account && subjects.ip ? `${subjects.account}\n${subjects.ip}` : undefined;
  return subjects[dimension];
}

export function createSecurityWindows(input: {
  store: CounterStore;
  settings: Settings;
  clock: Clock;
  logger: Logger;
}): SecurityWindows {
  const limits = windowLimits(input.settings);

  const windowsOf = (kind: WindowKind, subjects: WindowSubjects) => {
    const out: { window: WindowLimit; spec: WindowSpec }[] = [];
    for (const window of limits[kind]) {
      const subject = subjectOf(window.dimension, subjects);
      if (!subject) continue;
      const windowMs = window.windowSeconds * 1000;
      out.push({
        window,
        spec: {
          key: windowKey(kind, window.dimension, subject),
          limit: window.soft ? NO_HARD_LIMIT : window.limit,
          windowMs,
          ...(window.slow ? { slow: window.slow } : {}),
        },
      });
    }
    if (out.length === 0) throw new Error(`security window "${kind}" needs a subject or an ip`);
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
    const windows = windowsOf(kind, subjects);
    const nowMs = input.clock.now().getTime();
    let outcome: Awaited<ReturnType<CounterStore["window"]>>;
    try {
      outcome = await input.store.window(
        mode,
        windows.map((w) => w.spec),
        nowMs,
      );
    } catch (error) {
      throw unavailable(kind, error);
    }
    const decision: WindowDecision = {
      allowed: outcome.allowed,
      retryAfterSeconds: outcome.allowed ? 0 : Math.max(1, Math.ceil(outcome.retryAfterMs / 1000)),
    };
    if (!outcome.allowed) {
      let longest = 0;
      outcome.waits.forEach((wait, i) => {
        if (wait > (outcome.waits[longest] ?? 0)) longest = i;
      });
      const refusing = windows[longest]?.window;
      if (refusing) {
        decision.refusedBy = {
          name: refusing.name,
          limit: refusing.limit,
          windowSeconds: refusing.windowSeconds,
        };
      }
    }
    if (mode === "hit" || (mode === "consume" && outcome.allowed)) decision.recordedAtMs = nowMs;
    return decision;
  };

  return {
    check: (kind, subjects) => run("check", kind, subjects),
    hit: (kind, subjects) => run("hit", kind, subjects),
    consume: (kind, subjects) => run("consume", kind, subjects),
    reset: async (kind, subjects) => {
      const keys = windowsOf(kind, subjects)
        .filter((w) => w.window.dimension !== "ip")
        .map((w) => w.spec.key);
      if (keys.length === 0) return;
      try {
        await input.store.resetWindows(keys);
      } catch (error) {
        throw unavailable(kind, error);
      }
    },
    refund: async (kind, subjects, recordedAtMs) => {
      const keys = windowsOf(kind, subjects).map((w) => w.spec.key);
      try {
        await input.store.refundWindows(keys, recordedAtMs);
      } catch (error) {
        throw unavailable(kind, error);
      }
    },
  };
}

/**
 * Throws the 429 problem for a refused attempt: the same body whether or not the account exists,
 * naming the window that refused as its rate-limit policy.
 */
export function assertAllowed(decision: WindowDecision): void {
  if (decision.allowed) return;
  const retryAfterSeconds = Math.max(decision.retryAfterSeconds, 1);
  throw new AppError("rate_limited", "Too many attempts. Try again later.", {
    retryAfterSeconds,
    ...(decision.refusedBy
      ? { rateLimit: { policy: decision.refusedBy.name, resetSeconds: retryAfterSeconds } }
      : {}),
  });
}
