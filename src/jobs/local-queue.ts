import type { ClaimedJob } from "./queue.ts";

/** The local queue holds about this much work at the recent mean run time. */
export const LOCAL_QUEUE_HORIZON_MS = 50;
/** Weight of the newest run time in the mean that sizes the local queue. */
const MEAN_WEIGHT = 0.05;

/**
 * Jobs a loop claimed ahead of free slots, in claim order, and the mean run time that sizes it.
 *
 * The local queue (`localQueue` > 0, `BackgroundProcessing:JobLocalQueueSize`; off by default):
 * claims may take more jobs than there are free slots; the extra ones wait here, claimed under the
 * same lease and renewed by the same heartbeat, and start as slots free without a round trip. It
 * holds at most about LOCAL_QUEUE_HORIZON_MS of work at the recent mean run time (never more than
 * `localQueue` jobs), so a job that arrives later — a higher priority, another tenant — waits at
 * most about that long behind it; jobs that take longer than the horizon get no queue at all. A
 * queued job an admin cancels or whose lease was lost is dropped, never started; one whose lease is
 * too short to run is dropped too; at shutdown the queue is released (attempt not counted) first.
 */
export class LocalQueue {
  #jobs: ClaimedJob[] = [];
  /** Mean handler time (ms), exponentially weighted; undefined until a run finished. */
  #meanRunMs: number | undefined;

  constructor(
    /** At most this many jobs (0: no local queue). */
    readonly size: number,
    readonly parallelism: number,
    readonly batchSize: number,
  ) {}

  get length(): number {
    return this.#jobs.length;
  }

  /** The queued jobs, oldest claim first. */
  jobs(): readonly ClaimedJob[] {
    return this.#jobs;
  }

  /**
   * How many jobs the queue may hold now: LOCAL_QUEUE_HORIZON_MS of work at the mean run time over
   * `parallelism` slots, at most `size`; before any run finished, the batch size.
   */
  target(): number {
    if (this.size <= 0) return 0;
    if (this.#meanRunMs === undefined) return Math.min(this.size, this.batchSize);
    const fits = (LOCAL_QUEUE_HORIZON_MS / Math.max(this.#meanRunMs, 0.001)) * this.parallelism;
    return Math.min(this.size, Math.floor(fits));
  }

  /** A handler took `ms`. */
  sample(ms: number): void {
    this.#meanRunMs =
      this.#meanRunMs === undefined ? ms : this.#meanRunMs + MEAN_WEIGHT * (ms - this.#meanRunMs);
  }

  push(jobs: ClaimedJob[]): void {
    this.#jobs.push(...jobs);
  }

  shift(): ClaimedJob | undefined {
    return this.#jobs.shift();
  }

  /** Takes one run out (canceled or lost before it started); undefined when it is not here. */
  remove(id: number, attempts: number): ClaimedJob | undefined {
    const at = this.#jobs.findIndex((j) => j.id === id && j.attempts === attempts);
    return at < 0 ? undefined : this.#jobs.splice(at, 1)[0];
  }

  /** Takes up to `n` queued jobs of `job`'s batch (same kind, group and priority) out, oldest claim first. */
  takeBatch(job: ClaimedJob, n: number): ClaimedJob[] {
    const taken: ClaimedJob[] = [];
    this.#jobs = this.#jobs.filter((j) => {
      const same = j.kind === job.kind && j.groupKey === job.groupKey && j.priority === job.priority;
      if (!same || taken.length >= n) return true;
      taken.push(j);
      return false;
    });
    return taken;
  }

  /** Empties the queue (shutdown: the jobs are given back). */
  clear(): ClaimedJob[] {
    return this.#jobs.splice(0);
  }
}
