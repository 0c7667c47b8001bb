import { describeError } from "../redact.ts";

/** What one interval loop did last in this process (the console's overview shows it). */
export interface LoopState {
  name: string;
  /** When the last tick ended, whatever its outcome. */
  lastTickAt: Date | null;
  lastErrorAt: Date | null;
  /** The last failed tick's error, redacted; kept after later ticks succeed (with its time). */
  lastError: string | null;
  ticks: number;
  failures: number;
}

/**
 * The last tick and last error of each interval loop of this process, in memory: a console page
 * reads it from the process that serves it (each API process runs its own loops).
 */
export class LoopStatusBoard {
  readonly #states = new Map<string, LoopState>();
  readonly #now: () => Date;
  readonly #text: (value: string) => string;

  constructor(options: { now: () => Date; redact: (value: string) => string }) {
    this.#now = options.now;
    this.#text = options.redact;
  }

  #state(name: string): LoopState {
    let state = this.#states.get(name);
    if (!state) {
      state = { name, lastTickAt: null, lastErrorAt: null, lastError: null, ticks: 0, failures: 0 };
      this.#states.set(name, state);
    }
    return state;
  }

  /** A loop that runs in this process, before its first tick. */
  started(name: string): void {
    this.#state(name);
  }

  ticked(name: string, error?: unknown): void {
    const state = this.#state(name);
    const now = this.#now();
    state.lastTickAt = now;
    state.ticks++;
    if (error !== undefined) {
      state.failures++;
      state.lastErrorAt = now;
      state.lastError = describeError(error, this.#text).message.slice(0, 500);
    }
  }

  /** Copies of every loop's state, by name. */
  snapshot(): LoopState[] {
    return [...this.#states.values()].map((s) => ({ ...s })).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Wraps a loop's tick so its end and outcome are recorded. */
  wrap<T>(name: string, tick: () => Promise<T>): () => Promise<T> {
    this.started(name);
    return async () => {
      try {
        const result = await tick();
        this.ticked(name);
        return result;
      } catch (error) {
        this.ticked(name, error);
        throw error;
      }
    };
  }
}
