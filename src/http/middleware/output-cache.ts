import { createHash } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { Cache } from "../../cache/index.ts";
import type { Logger } from "../../telemetry/logger.ts";
import type { AppEnv } from "../request-context.ts";

/**
 * HTTP output cache for anonymous, cacheable GETs that opt in (the public plan catalog; not the JWKS, see well-known.ts).
 * Entries live in the cache, keyed by path, the query parameters the route declares (`query`;
 * any other parameter is ignored, so made-up query strings such as `?cb=N` add no entry), tenant
 * and the request headers the response names in `Vary` (at most `MAX_VARIANTS` variants a key). Bypassed for requests with `Authorization` or `Cookie`; never stores a response
 * that is not 200, sets a cookie, says `Vary: *`, or is `private`/`no-store`. A cache error serves
 * the route normally. Mount it after tenant resolution (it keys by `c.get("tenant")`).
 */
export interface OutputCacheOptions {
  cache: Cache | null;
  /** Default: on in Production only (`Cache:OutputCacheEnabled`). */
  enabled: boolean;
  ttlSeconds: number;
  logger: Logger;
  /** Largest body stored, in bytes; default 256 KiB. */
  maxBodyBytes?: number;
  /** The query parameters the route reads: only these are part of the key (default: none). */
  query?: readonly string[];
}

/**
 * The most variants (distinct values of the `Vary` request headers, e.g. `Origin`) kept under one
 * key: a client making up header values cannot add entries past it. docs/cache.md gives the bound.
 */
export const MAX_VARIANTS = 16;
export const DEFAULT_MAX_BODY_BYTES = 256 * 1024;

interface Entry {
  /** Header names (lower case) the response varies on; a variant entry has them resolved. */
  vary: string[];
  /** The variant keys stored under this base key (at most `MAX_VARIANTS`). */
  variants?: string[];
  status?: number;
  headers?: [string, string][];
  body?: string;
  storedAt?: number;
}

const NOT_STORED = new Set(["set-cookie", "x-request-id", "ratelimit", "ratelimit-policy", "age", "x-cache"]);

function hash(parts: string[]): string {
  return createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 40);
}

export function outputCache(options: OutputCacheOptions): MiddlewareHandler<AppEnv> {
  const { cache } = options;
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const declared = [...new Set(options.query ?? [])].sort();
  if (!options.enabled || !cache) return async (_c, next) => next();

  return async (c, next) => {
    if (c.req.method !== "GET" || c.req.header("authorization") || c.req.header("cookie")) return next();
    // only the declared parameters, re-encoded, so `?a=1%26b%3D2` and `?a=1&b=2` are different keys
    const query = new URLSearchParams(
      declared.flatMap((name) => (c.req.queries(name) ?? []).map((value): [string, string] => [name, value])),
    ).toString();
    const tenant = c.get("tenant")?.id ?? "-";
    const baseKey = `out:${hash([tenant, c.req.path, query])}`;
    const variantKey = (vary: string[]) =>
      vary.length === 0
        ? baseKey
        : `${baseKey}:${hash(vary.map((name) => `${name}=${c.req.header(name) ?? ""}`))}`;

    try {
      const base = await cache.get(baseKey);
      if (base) {
        const index = JSON.parse(base) as Entry;
        const entry = index.vary.length === 0 ? index : await readEntry(cache, variantKey(index.vary));
        if (entry?.status && entry.body !== undefined) {
          const headers = new Headers(entry.headers);
          headers.set(
            "age",
            String(Math.max(0, Math.floor((Date.now() - (entry.storedAt ?? Date.now())) / 1000))),
          );
          headers.set("x-cache", "hit");
          return new Response(Buffer.from(entry.body, "base64"), { status: entry.status, headers });
        }
      }
    } catch (error) {
      options.logger.warn("output cache read failed", { error: (error as Error).message });
    }

    await next();
    const res = c.res;
    const cacheControl = res.headers.get("cache-control") ?? "";
    const varyHeader = res.headers.get("vary") ?? "";
    if (
      res.status !== 200 ||
      res.headers.has("set-cookie") ||
      /\b(private|no-store)\b/i.test(cacheControl) ||
      varyHeader.includes("*")
    )
      return;
    const vary = varyHeader
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean)
      .sort();
    if (vary.includes("authorization") || vary.includes("cookie")) return;
    const body = new Uint8Array(await res.clone().arrayBuffer());
    if (body.byteLength > maxBody) return;
    const headers = [...res.headers.entries()].filter(([name]) => !NOT_STORED.has(name.toLowerCase()));
    const entry: Entry = {
      vary,
      status: 200,
      headers,
      body: Buffer.from(body).toString("base64"),
      storedAt: Date.now(),
    };
    try {
      if (vary.length === 0) await cache.set(baseKey, JSON.stringify(entry), options.ttlSeconds);
      else {
        const key = variantKey(vary);
        const index = await readEntry(cache, baseKey);
        const known = index && index.vary.join() === vary.join() ? (index.variants ?? []) : [];
        if (!known.includes(key)) {
          // full: this variant is served, not stored (a made-up header value adds nothing)
          if (known.length >= MAX_VARIANTS) return;
          known.push(key);
        }
        await cache.set(key, JSON.stringify(entry), options.ttlSeconds);
        await cache.set(
          baseKey,
          JSON.stringify({ vary, variants: known } satisfies Entry),
          options.ttlSeconds,
        );
      }
      c.header("x-cache", "miss");
    } catch (error) {
      options.logger.warn("output cache write failed", { error: (error as Error).message });
    }
  };
}

async function readEntry(cache: Cache, key: string): Promise<Entry | null> {
  const text = await cache.get(key);
  return text ? (JSON.parse(text) as Entry) : null;
}

/**
 * The output cache as configured: routes opt in with `router.use(path, outputCacheFor(deps))`,
 * naming the query parameters they read (`{ query: ["page"] }`); the others never reach the key.
 */
export function outputCacheFor(
  deps: {
    cache: Cache | null;
    logger: Logger;
    config: {
      environment: string;
      settings: { Cache: { OutputCacheEnabled?: boolean; OutputCacheSeconds: number } };
    };
  },
  route: { ttlSeconds?: number; query?: readonly string[] } = {},
): MiddlewareHandler<AppEnv> {
  const settings = deps.config.settings.Cache;
  return outputCache({
    cache: deps.cache,
    enabled: settings.OutputCacheEnabled ?? deps.config.environment === "Production",
    ttlSeconds: route.ttlSeconds ?? settings.OutputCacheSeconds,
    logger: deps.logger,
    query: route.query,
  });
}
