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
  // by method, then path: no `${method} ${path}` key string built and hashed on every request
  #young = new Map<string, Map<string, Result<T>>>();
  #old = new Map<string, Map<string, Result<T>>>();
  #youngSize = 0;
  #oldSize = 0;

  constructor(inner: Router<T> = new SmartRouter<T>({ routers: [new RegExpRouter(), new TrieRouter()] })) {
    this.#inner = inner;
    this.name = `MemoRouter(${inner.name})`;
  }

  add(method: string, path: string, handler: T): void {
    this.#young = new Map();
    this.#old = new Map();
    this.#youngSize = 0;
    this.#oldSize = 0;
    this.#inner.add(method, path, handler);
  }

  match(method: string, path: string): Result<T> {
    let paths = this.#young.get(method);
    let result = paths?.get(path);
    if (result !== undefined) return result;
    result = this.#old.get(method)?.get(path) ?? this.#inner.match(method, path);
    if (this.#youngSize >= GENERATION) {
      this.#old = this.#young;
      this.#oldSize = this.#youngSize;
      this.#young = new Map();
      this.#youngSize = 0;
      paths = undefined;
    }
    if (paths === undefined) {
      paths = new Map();
      this.#young.set(method, paths);
    }
    paths.set(path, result);
    this.#youngSize++;
    return result;
  }

  /** Paths remembered (for the bound's test). */
  get size(): number {
    return this.#youngSize + this.#oldSize;
  }
}
