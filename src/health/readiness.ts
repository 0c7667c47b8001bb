import type { Clock } from "../clock.ts";

export type CheckStatus = "pass" | "fail";

export interface Probe {
  /** `component:measurement`, as application/health+json keys its checks. */
  name: string;
  componentType: string;
  run(timeoutMs: number): Promise<void>;
  /** The failure as the readiness answer names it (`database missing (3D000)`); default "unreachable". */
  explain?(error: unknown): string;
}

export interface CheckResult {
  componentType: string;
  status: CheckStatus;
  observedValue: number;
  observedUnit: "ms";
  time: string;
  output?: string;
}

export interface Readiness {
  status: CheckStatus;
  checks: Record<string, CheckResult[]>;
}

/**
 * Runs every probe in parallel, each bounded by `timeoutMs`. Concurrent callers share one run in
 * flight, so a burst of probes never multiplies load on the database.
 */
export function createReadinessCheck(probes: Probe[], options: { timeoutMs: number; clock: Clock }) {
  let inFlight: Promise<Readiness> | undefined;
  const runOnce = async (): Promise<Readiness> => {
    const results = await Promise.all(
      probes.map(async (probe): Promise<[string, CheckResult]> => {
        const started = performance.now();
        let output: string | undefined;
        try {
          await probe.run(options.timeoutMs);
        } catch (error) {
          // the message is ours (timeout) or the driver's; keep it short and free of connection details
          output = /timed out/.test(String((error as Error)?.message))
            ? "timed out"
            : (probe.explain?.(error) ?? "unreachable");
        }
        const result: CheckResult = {
          componentType: probe.componentType,
          status: output ? "fail" : "pass",
          observedValue: Math.round((performance.now() - started) * 10) / 10,
          observedUnit: "ms",
          time: options.clock.now().toISOString(),
          ...(output ? { output } : {}),
        };
        return [probe.name, result];
      }),
    );
    return {
      status: results.every(([, r]) => r.status === "pass") ? "pass" : "fail",
      checks: Object.fromEntries(results.map(([name, result]) => [name, [result]])),
    };
  };
  return (): Promise<Readiness> => {
    inFlight ??= runOnce().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };
}
