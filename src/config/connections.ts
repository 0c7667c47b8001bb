import { userInfo } from "node:os";
import { parseRedisClusterUrl } from "../cache/cluster-url.ts";
import type { ConfigProblem } from "./config-error.ts";
import type { Environment, Settings } from "./schema.ts";
import { secretKeys } from "./tree.ts";

export type DatabaseSource =
  | "ConnectionStrings:Database"
  | "DATABASE_URL"
  | "development default"
  | "embedded default";

export interface DatabaseConnection {
  url: string;
  source: DatabaseSource;
  embedded: boolean;
  /** The direct (session) connection beside a transaction pooler, when configured. */
  directUrl?: string;
  poolMode: "session" | "transaction";
}

export interface CacheConnection {
  url: string;
  source: "ConnectionStrings:Cache" | "CACHE_URL";
  token?: string;
}

export const EMBEDDED_DEFAULT_URL = "pglite:./.data/dev";

type Env = Record<string, string | undefined>;

/**
 * The database to use: `ConnectionStrings:Database`, else `DATABASE_URL`, else (Development only)
 * the local or embedded default; a missing one outside Development is a problem. `directUrl` is the
 * configured direct connection as given (a secret even where it is not used).
 */
export function resolveDatabase(
  settings: Settings,
  env: Env,
  environment: Environment,
  embeddedFallback: boolean,
  problems: ConfigProblem[],
): { database: DatabaseConnection | undefined; directUrl: string | undefined } {
  let database: DatabaseConnection | undefined;
  const fromSettings = settings.ConnectionStrings.Database;
  const fromEnv = env.DATABASE_URL?.trim();
  const poolMode = settings.Database.PoolMode;
  if (fromSettings)
    database = { url: fromSettings, source: "ConnectionStrings:Database", embedded: false, poolMode };
  else if (fromEnv) database = { url: fromEnv, source: "DATABASE_URL", embedded: false, poolMode };
  else if (environment === "Development") {
    database = embeddedFallback
      ? { url: EMBEDDED_DEFAULT_URL, source: "embedded default", embedded: true, poolMode: "session" }
      : {
          url: `postgres://${userInfo().username}@localhost:5432/plinth`,
          source: "development default",
          embedded: false,
          poolMode: "session",
        };
  } else {
    problems.push({
      key: "ConnectionStrings:Database",
      problem: "is required (or DATABASE_URL) outside Development",
    });
  }
  if (database) database.embedded = database.url.startsWith("pglite:");
  const directUrl =
    settings.ConnectionStrings.DatabaseDirect ?? (env.DATABASE_DIRECT_URL?.trim() || undefined);
  if (database && directUrl) {
    if (!/^postgres(ql)?:\/\//.test(directUrl))
      problems.push({
        key: "ConnectionStrings:DatabaseDirect",
        problem: "must be a postgres:// URL (or DATABASE_DIRECT_URL)",
      });
    else if (!database.embedded) database.directUrl = directUrl;
  }
  if (database?.embedded) database.poolMode = "session";
  return { database, directUrl };
}

/** The cache: `ConnectionStrings:Cache`, else `CACHE_URL`, else none; `token` as configured. */
export function resolveCache(
  settings: Settings,
  env: Env,
): { cache: CacheConnection | null; token: string | undefined } {
  const fromSettings = settings.ConnectionStrings.Cache;
  const fromEnv = env.CACHE_URL?.trim();
  const token = settings.ConnectionStrings.CacheToken ?? (env.CACHE_TOKEN?.trim() || undefined);
  const cache: CacheConnection | null = fromSettings
    ? { url: fromSettings, source: "ConnectionStrings:Cache" }
    : fromEnv
      ? { url: fromEnv, source: "CACHE_URL" }
      : null;
  if (cache && token) cache.token = token;
  return { cache, token };
}

/**
 * Every secret value of a configuration, for redaction: the secret keys' values, the passwords and
 * tokens inside the connection URLs (and the URLs whole), the cache token, and every variable whose
 * name says it holds a secret.
 */
export function secretValuesOf(
  settings: Settings,
  env: Env,
  urls: readonly (string | undefined)[],
  token: string | undefined,
): string[] {
  const secretValues = new Set<string>();
  for (const key of secretKeys) {
    for (const value of valuesAt(settings, key))
      if (typeof value === "string" && value.length > 0) secretValues.add(value);
  }
  for (const url of urls) if (url) for (const value of urlSecrets(url)) secretValues.add(value);
  if (token) secretValues.add(token);
  for (const [name, value] of Object.entries(env)) {
    // key ids are not secret (the API returns them); a `_FILE` variable holds a path
    if (/key_?id$|_FILE$/i.test(name)) continue;
    if (value && /PASSWORD|SECRET|TOKEN|PEPPER|PRIVATE_?KEY|MASTER_KEY|API_KEY/i.test(name))
      secretValues.add(value);
  }
  return [...secretValues];
}

function urlSecrets(url: string): string[] {
  const out = [url];
  try {
    const cluster = parseRedisClusterUrl(url);
    if (cluster?.password) out.push(cluster.password, encodeURIComponent(cluster.password));
  } catch {
    // a malformed cluster URL: the whole URL is hidden already
  }
  try {
    const parsed = new URL(url);
    if (parsed.password) out.push(decodeURIComponent(parsed.password), parsed.password);
    for (const [name, value] of parsed.searchParams) if (/pass|token|secret|key/i.test(name)) out.push(value);
  } catch {
    // not a URL (e.g. pglite:memory:): nothing more to hide
  }
  return out;
}

/** Values at a key; `N` segments (array items, as secretKeys names them) fan out over every item. */
function valuesAt(settings: Settings, key: string): unknown[] {
  let values: unknown[] = [settings];
  for (const segment of key.split(":")) {
    values = values.flatMap((value) => {
      if (value === null || typeof value !== "object") return [];
      if (segment === "N" && Array.isArray(value)) return value;
      return [(value as Record<string, unknown>)[segment]];
    });
  }
  return values;
}
