import type { Logger } from "../telemetry/logger.ts";
import { parseHostname } from "../tenancy/hostnames.ts";

/** A custom hostname as the gateway reports it (Cloudflare for SaaS `custom_hostnames`). */
export interface GatewayHostname {
  id: string;
  hostname: string;
  /** `result.status`, e.g. `pending`, `active`, `blocked`. */
  status: string | null;
  /** `result.ssl.status`, e.g. `initializing`, `pending_validation`, `active`. */
  sslStatus: string | null;
}

/** The gateway refused or could not be reached; `message` never holds the API key. */
export class GatewayError extends Error {
  override name = "GatewayError";
  constructor(
    message: string,
    /** HTTP status, or null when no answer came. */
    readonly status: number | null,
    /** Worth another attempt: a timeout, a network error, 429 or 5xx. */
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export interface GatewayClient {
  findByHostname(hostname: string): Promise<GatewayHostname | null>;
  get(id: string): Promise<GatewayHostname | null>;
  /** The hostname's entry, created if none exists: looks up first, so retries never double-create. */
  ensure(hostname: string): Promise<GatewayHostname>;
  /** Removes the entry (by id, or found by hostname); false when there was none. */
  remove(input: { id?: string | null; hostname: string }): Promise<boolean>;
}

export interface GatewayOptions {
  /** The zone's API base, e.g. `https://api.cloudflare.com/client/v4/zones/<zone id>`. */
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  /** Extra attempts after a retryable failure. */
  retries: number;
  /** Pause before the n-th retry: `retryDelayMs * 2^(n-1)`. Default 250. */
  retryDelayMs?: number;
  logger?: Logger;
  fetch?: typeof fetch;
}

interface Envelope {
  success?: boolean;
  errors?: { code?: number; message?: string }[];
  result?: unknown;
}

function toHostname(value: unknown): GatewayHostname | null {
  if (typeof value !== "object" || value === null) return null;
  const r = value as {
    id?: unknown;
    hostname?: unknown;
    status?: unknown;
    ssl?: { status?: unknown } | null;
  };
  if (typeof r.id !== "string" || typeof r.hostname !== "string") return null;
  return {
    id: r.id,
    hostname: r.hostname.toLowerCase(),
    status: typeof r.status === "string" ? r.status : null,
    sslStatus: typeof r.ssl?.status === "string" ? r.ssl.status : null,
  };
}

/** The envelope's errors as one line: `1406 Duplicate custom hostname found.` (bounded). */
function describe(envelope: Envelope | null, status: number): string {
  const errors = (envelope?.errors ?? [])
    .map((e) => [e.code, e.message].filter((x) => x !== undefined).join(" "))
    .filter(Boolean)
    .join("; ");
  return `gateway answered HTTP ${status}${errors ? `: ${errors.slice(0, 300)}` : ""}`;
}

/** The resolved options one client uses for every request. */
interface Connection {
  base: string;
  apiKey: string;
  fetch: typeof fetch;
  timeoutMs: number;
  retries: number;
  /** Pause before the n-th retry: `delayMs * 2^(n-1)`. */
  delayMs: number;
  logger?: Logger;
}

/** Resolves after `ms` (timers only: the same under Bun, Node and Deno). */
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One request, no retry; null for a 404 when `notFoundIsNull`. */
async function requestOnce(
  conn: Connection,
  method: string,
  path: string,
  body: unknown,
  notFoundIsNull: boolean,
): Promise<Envelope | null> {
  let response: Response;
  try {
    response = await conn.fetch(`${conn.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${conn.apiKey}`,
        accept: "application/json",
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(conn.timeoutMs),
      redirect: "error",
    });
  } catch (error) {
    const timedOut = error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
    throw new GatewayError(
      timedOut ? `gateway timed out after ${conn.timeoutMs} ms` : "gateway unreachable",
      null,
      true,
    );
  }
  let envelope: Envelope | null = null;
  try {
    envelope = (await response.json()) as Envelope;
  } catch {
    envelope = null;
  }
  if (response.status === 404 && notFoundIsNull) return null;
  const retryable = response.status === 429 || response.status >= 500;
  if (!response.ok || !envelope || envelope.success !== true)
    throw new GatewayError(describe(envelope, response.status), response.status, retryable);
  return envelope;
}

/** One request with retries; null for a 404 when `notFoundIsNull`. */
async function request(
  conn: Connection,
  method: string,
  path: string,
  body?: unknown,
  opts: { notFoundIsNull?: boolean; retry?: boolean } = {},
): Promise<Envelope | null> {
  const attempts = 1 + (opts.retry === false ? 0 : conn.retries);
  let last: GatewayError | undefined;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) await pause(conn.delayMs * 2 ** (attempt - 2));
    try {
      return await requestOnce(conn, method, path, body, opts.notFoundIsNull === true);
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      last = error;
      conn.logger?.warn("gateway request failed", {
        method,
        path,
        status: error.status,
        attempt,
        retryable: error.retryable,
      });
      if (!error.retryable) break;
    }
  }
  throw last ?? new GatewayError("gateway request failed", null, false);
}

/** Only canonical hostnames (src/tenancy/hostnames.ts) ever reach the gateway. */
function canonical(hostname: string): string {
  const parsed = parseHostname(hostname);
  if (!parsed.ok) throw new GatewayError(`not a canonical hostname: ${parsed.reason}`, null, false);
  return parsed.hostname;
}

async function findEntry(
  conn: Connection,
  hostname: string,
  retry: boolean,
): Promise<GatewayHostname | null> {
  // a name that is not canonical was never created there (ensure refuses it): nothing to find
  if (!parseHostname(hostname).ok) return null;
  const query = `?hostname=${encodeURIComponent(hostname)}`;
  const envelope = await request(conn, "GET", `/custom_hostnames${query}`, undefined, { retry });
  const list = Array.isArray(envelope?.result) ? envelope.result : [];
  for (const item of list) {
    const entry = toHostname(item);
    if (entry && entry.hostname === hostname) return entry;
  }
  return null;
}

async function ensureEntry(conn: Connection, raw: string): Promise<GatewayHostname> {
  const hostname = canonical(raw);
  // a create that timed out may have succeeded: every attempt looks up before it creates
  // (one loop of attempts, not nested ones, so a check stays well inside the domain lease)
  let last: GatewayError | undefined;
  for (let attempt = 0; attempt <= conn.retries; attempt++) {
    if (attempt > 0) await pause(conn.delayMs * 2 ** (attempt - 1));
    try {
      const existing = await findEntry(conn, hostname, false);
      if (existing) return existing;
      const envelope = await request(
        conn,
        "POST",
        "/custom_hostnames",
        { hostname, ssl: { method: "http", type: "dv" } },
        { retry: false },
      );
      const created = toHostname(envelope?.result);
      if (!created) throw new GatewayError("gateway answer has no custom hostname", 200, false);
      return created;
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      last = error;
      // a duplicate (409, or Cloudflare's 400 with code 1406) is found by the next lookup
      const duplicate = error.status === 409 || /\b1406\b|duplicate/i.test(error.message);
      if (!error.retryable && !duplicate) throw error;
    }
  }
  throw last ?? new GatewayError("gateway request failed", null, false);
}

async function removeEntry(
  conn: Connection,
  input: { id?: string | null; hostname: string },
): Promise<boolean> {
  const { id, hostname } = input;
  const target = id ?? (await findEntry(conn, hostname, true))?.id;
  if (!target) return false;
  const envelope = await request(
    conn,
    "DELETE",
    `/custom_hostnames/${encodeURIComponent(target)}`,
    undefined,
    {
      notFoundIsNull: true,
    },
  );
  if (envelope === null && id) {
    // the stored id is gone; an entry for the name made later would still serve it
    const other = await findEntry(conn, hostname, true);
    if (other && other.id !== id) return removeEntry(conn, { id: other.id, hostname });
  }
  return envelope !== null;
}

/**
 * A client of Cloudflare's custom-hostnames API (`{GatewayBaseUrl}/custom_hostnames`), the
 * TLS gateway of Cloudflare for SaaS; a gateway speaking the same API works too. Bearer
 * `GatewayApiKey`, which is never logged or put in an error.
 */
export function createGatewayClient(options: GatewayOptions): GatewayClient {
  const conn: Connection = {
    base: options.baseUrl.replace(/\/+$/, ""),
    apiKey: options.apiKey,
    fetch: options.fetch ?? fetch,
    timeoutMs: options.timeoutMs,
    retries: options.retries,
    delayMs: options.retryDelayMs ?? 250,
    logger: options.logger,
  };
  return {
    findByHostname: (hostname) => findEntry(conn, hostname, true),
    async get(id) {
      const envelope = await request(conn, "GET", `/custom_hostnames/${encodeURIComponent(id)}`, undefined, {
        notFoundIsNull: true,
      });
      return envelope ? toHostname(envelope.result) : null;
    },
    ensure: (hostname) => ensureEntry(conn, hostname),
    remove: (input) => removeEntry(conn, input),
  };
}
