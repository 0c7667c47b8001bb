import type { Result, Router } from "hono/router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";

/** Paths remembered per generation (two generations: at most twice this many). */
const GENERATION = 1_000;

/**
 * Hono's own router (SmartRouter: RegExpRouter, else TrieRouter) with its answers remembered per
 * method and path. Plinth's route table (360 entries with the per-area middleware) is one
 * RegExpRouter cannot take (`/api/admin/jobs/retry` beside `/api/admin/jobs/:id/retry`), so every
 * request walked TrieRouter's tree, ~4 µs of an authenticated request's CPU (docs/performance.md);
 * a repeated path (`/api/auth/me`, a list page) is now one Map lookup.
 *
 * An answer depends only on the method and the path, and the table does not change once the app
 * serves (an `add` forgets everything anyway). Bounded like the verified-token cache: two
 * generations of `GENERATION` paths, the older dropped whole when the younger fills, so a client
 * sending endless distinct paths costs a bounded amount of memory.
 */
export class MemoRouter<T> implements Router<T> {
  readonly name: string;
  readonly #inner: Router<T>;
  #young = new Map<string, Result<T>>();
  #old = new Map<string, Result<T>>();

  constructor(inner: Router<T> = new SmartRouter<T>({ routers: [new RegExpRouter(), new TrieRouter()] })) {
    this.#inner = inner;
    this.name = `MemoRouter(${inner.name})`;
  }

  add(method: string, path: string, handler: T): void {
    this.#young.clear();
    this.#old.clear();
    this.#inner.add(method, path, handler);
  }

  match(method: string, path: string): Result<T> {
    const key = `${method} ${path}`;
    let result = this.#young.get(key);
    if (result !== undefined) return result;
    result = this.#old.get(key) ?? this.#inner.match(method, path);
    if (this.#young.size >= GENERATION) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(key, result);
    return result;
  }

  /** Paths remembered (for the bound's test). */
  get size(): number {
    return this.#young.size + this.#old.size;
  }
}
