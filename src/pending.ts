import type { Logger } from "./telemetry/logger.ts";

/**
 * Work a request starts but does not wait for (an SMS code's lookup, storage and delivery, so the
 * answer takes as long whether or not the number is known). Failures are logged, never thrown at
 * anyone; graceful shutdown and tests await what is still running with `settled`.
 */
export class PendingTasks {
  readonly #tasks = new Set<Promise<void>>();
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Starts `work` without waiting for it; a failure is logged as `<name> failed` (error described). */
  run(name: string, work: () => Promise<void>): void {
    const task: Promise<void> = Promise.resolve()
      .then(work)
      .catch((error: unknown) => {
        // the logger describes errors: a failed query's parameter values never show
        this.#logger.error(`${name} failed`, { error });
      })
      .finally(() => {
        this.#tasks.delete(task);
      });
    this.#tasks.add(task);
  }

  /** How many tasks are still running. */
  get size(): number {
    return this.#tasks.size;
  }

  /**
   * Resolves when every task (including any started meanwhile) has finished, or after `timeoutMs`;
   * true when all finished.
   */
  async settled(timeoutMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.#tasks.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timedOut = Number.isFinite(left)
        ? new Promise<void>((resolve) => {
            timer = setTimeout(resolve, left);
          })
        : new Promise<void>(() => {});
      await Promise.race([Promise.allSettled([...this.#tasks]), timedOut]);
      clearTimeout(timer);
    }
    return true;
  }
}
