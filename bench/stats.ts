// Figures the benchmarks print: the median of runs and nearest-rank percentiles of samples.

/** The median (the mean of the two middle values for an even count). */
export function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** The nearest-rank percentile `p` (0–100) of the samples. */
export function percentile(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/**
 * Runs `op(0)` … `op(n − 1)` from `workers` concurrent loops (each takes the next index when it is
 * free): operations per second and latency percentiles in ms (p50 / p95 / p99).
 */
export async function drive(
  n: number,
  workers: number,
  op: (i: number) => Promise<unknown>,
): Promise<{ perSecond: number; p50: number; p95: number; p99: number }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = next++; i < n; i = next++) {
        const t0 = performance.now();
        await op(i);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { perSecond: Math.round(n / seconds), p50: at(0.5), p95: at(0.95), p99: at(0.99) };
}
