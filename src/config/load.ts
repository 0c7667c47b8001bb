import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, type ConfigProblem } from "./config-error.ts";
import {
  type CacheConnection,
  type DatabaseConnection,
  EMBEDDED_DEFAULT_URL,
  resolveCache,
  resolveDatabase,
  secretValuesOf,
} from "./connections.ts";
import { quickstartDefaults } from "./dev-quickstart.ts";
import { jsonErrorLine } from "./json-error-line.ts";
import { checkProduction } from "./production.ts";
import {
  configSchema,
  type Environment,
  environmentOverrides,
  environments,
  type Settings,
} from "./schema.ts";
import {
  isSecretKey,
  miscasedSettingsFiles,
  resolveFileVariables,
  unescapePem,
  unknownFileKeys,
  unknownVariableKeys,
} from "./sources.ts";
import { describeType, nodeAt, type SchemaNode, schemaTree, typesOf } from "./tree.ts";
import { readTrustedCa } from "./trusted-ca.ts";

export interface AppConfig {
  environment: Environment;
  settings: Settings;
  database: DatabaseConnection;
  /** null when no cache is configured (allowed outside Production only). */
  cache: CacheConnection | null;
  /** Every secret value in this configuration, for redaction. */
  secretValues: string[];
  /**
   * Where a key's value came from when that was a variable the operator may not recognise under
   * the key's name (`PLINTH_TENANT_SECRET_MASTER_KEY`, `…_FILE`), by lower-case key.
   */
  sources: Map<string, string>;
  /** Problems that are warnings here (unknown keys outside Production): the caller logs them. */
  warnings: ConfigProblem[];
  webhookTrustedCa?: string[]; // the PEM certificates of `Webhooks:TrustedCaFile`
  emailTrustedCa?: string[]; // the PEM certificates of `Email:Smtp:TrustedCaFile`
}

/** `the value of Key (from VARIABLE)` wording for messages: names what the operator actually set. */
export function sourceNote(config: Pick<AppConfig, "sources">, key: string): string {
  const source = config.sources.get(key.toLowerCase());
  return source ? ` (set by ${source})` : "";
}

export interface LoadOptions {
  env?: Record<string, string | undefined>;
  /** Folder holding appsettings*.json; default `config` under the working directory. */
  configDir?: string;
  /** Highest-precedence values, by `Section:Key` (command-line flags use this). */
  overrides?: Record<string, string>;
  /** Without any configured database, use the embedded PGlite store instead of local PostgreSQL. */
  embeddedFallback?: boolean;
  /** The migrator needs only the database: Production's API checks do not apply to it. */
  process?: "api" | "migrator";
}

type Flat = Map<string, { key: string; value: unknown; source?: string }>;

function put(flat: Flat, key: string, value: unknown, source?: string): void {
  // a one-line PEM with literal `\n` (env files, CI variables) is read as the PEM it stands for
  const clean = typeof value === "string" ? unescapePem(value) : value;
  flat.set(key.toLowerCase(), { key, value: clean, ...(source ? { source } : {}) });
}

function flattenJson(flat: Flat, value: unknown, prefix: string): void {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) flattenJson(flat, item, `${prefix}:${i}`);
  } else if (value !== null && typeof value === "object") {
    for (const [name, child] of Object.entries(value))
      flattenJson(flat, child, prefix ? `${prefix}:${name}` : name);
  } else put(flat, prefix, value);
}

function readJsonFile(flat: Flat, path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return undefined; // an absent file is an empty source
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // never the parser's message: it quotes the offending token, which may be a secret value
    throw new ConfigError([{ key: path, problem: `is not valid JSON (near line ${jsonErrorLine(text)})` }]);
  }
  flattenJson(flat, parsed, "");
  return parsed;
}

function coerce(value: unknown, node: SchemaNode): unknown {
  if (typeof value !== "string") return value;
  if (value === "") return undefined; // an empty variable means "not set"
  const types = typesOf(node);
  if (types.includes("integer") && /^-?\d+$/.test(value.trim())) return Number(value);
  if (types.includes("number") && /^-?\d+(\.\d+)?$/.test(value.trim())) return Number(value);
  if (types.includes("boolean") && /^(true|false)$/i.test(value.trim()))
    return value.trim().toLowerCase() === "true";
  return value;
}

/** Builds the settings object from the flat, case-insensitive source map, shaped by the schema. */
function build(node: SchemaNode, key: string, flat: Flat): unknown {
  const types = typesOf(node);
  if (types.includes("object") && node.properties) {
    const out: Record<string, unknown> = {};
    for (const [name, child] of Object.entries(node.properties)) {
      const value = build(child, key ? `${key}:${name}` : name, flat);
      if (value !== undefined) out[name] = value;
    }
    return out;
  }
  if (types.includes("array") && node.items) {
    const items = node.items;
    const direct = flat.get(key.toLowerCase());
    if (typeof direct?.value === "string") {
      return direct.value
        .split(/[;,]/)
        .map((part) => part.trim())
        .filter(Boolean)
        .map((part) => coerce(part, items));
    }
    const prefix = `${key.toLowerCase()}:`;
    const indices = new Set<number>();
    for (const flatKey of flat.keys()) {
      if (!flatKey.startsWith(prefix)) continue;
      const index = flatKey.slice(prefix.length).split(":")[0] ?? "";
      if (/^\d+$/.test(index)) indices.add(Number(index));
    }
    if (indices.size === 0) return undefined;
    return [...indices].sort((a, b) => a - b).map((i) => build(items, `${key}:${i}`, flat));
  }
  const entry = flat.get(key.toLowerCase());
  return entry === undefined ? undefined : coerce(entry.value, node);
}

function problemOf(path: readonly PropertyKey[], code: string, message: string): ConfigProblem {
  const key = path.map(String).join(":");
  const node = nodeAt(path);
  const expected = node ? describeType(node) : "a valid value";
  if (code === "invalid_type" || code === "invalid_value" || code === "invalid_format") {
    return { key, problem: `must be ${expected}` };
  }
  if (code === "too_small" || code === "too_big") return { key, problem: `must be ${expected}` };
  return { key, problem: message };
}

function resolveEnvironment(env: Record<string, string | undefined>): Environment {
  const raw = env.PLINTH_ENVIRONMENT?.trim();
  if (!raw) return "Development";
  const match = environments.find((name) => name.toLowerCase() === raw.toLowerCase());
  if (!match) {
    throw new ConfigError([
      { key: "PLINTH_ENVIRONMENT", problem: `must be one of ${environments.join(", ")}` },
    ]);
  }
  return match;
}

/**
 * Loads configuration once: appsettings.json < appsettings.{Environment}.json < environment
 * variables (`Section__Key`) < the PLINTH_* / PORT overrides < explicit overrides. Throws
 * ConfigError naming every bad key (never a value); in Production also runs the start-up checks.
 */
export function loadConfig(options: LoadOptions = {}): AppConfig {
  const rawEnv = options.env ?? process.env;
  const environment = resolveEnvironment(rawEnv);
  const configDir = options.configDir ?? join(process.cwd(), "config");
  // `<SECRET>_FILE` variables (mounted secrets) become the variable they name
  const files = resolveFileVariables(rawEnv);
  const env = files.env;

  const flat: Flat = new Map();
  const unknown: ConfigProblem[] = miscasedSettingsFiles(configDir);
  for (const name of ["appsettings.json", `appsettings.${environment}.json`]) {
    const path = join(configDir, name);
    const parsed = readJsonFile(flat, path);
    if (parsed !== undefined) unknown.push(...unknownFileKeys(path, parsed));
  }
  unknown.push(...unknownVariableKeys(env));
  for (const [name, value] of Object.entries(env)) {
    // an empty variable (`Key=` in a compose file) is "not set": the files below it still apply
    if (value === undefined || value === "") continue;
    const source = files.fromFile.get(name);
    // `Section__Key`, or `Section:Key` where the environment allows the colon (env files, compose)
    if (name.includes("__") || name.includes(":")) put(flat, name.split("__").join(":"), value, source);
    else if (nodeAt([name]) && name !== "PORT") put(flat, name, value, source);
  }
  for (const [variable, key] of Object.entries(environmentOverrides)) {
    const value = env[variable];
    if (value !== undefined && value !== "") put(flat, key, value, files.fromFile.get(variable) ?? variable);
  }
  for (const [key, value] of Object.entries(options.overrides ?? {})) put(flat, key, value);
  // `npm run dev` (Development, embedded default database): what it needs to show everything
  if (environment === "Development" && options.embeddedFallback && !flat.has("connectionstrings:database")) {
    if (!env.DATABASE_URL?.trim()) {
      const port = Number(env.PORT || flat.get("server:port")?.value || 8080);
      const dir = EMBEDDED_DEFAULT_URL.slice("pglite:".length);
      const defaults = quickstartDefaults(dir, port, (key) => flat.has(key.toLowerCase()));
      for (const [key, value] of Object.entries(defaults)) put(flat, key, value, `npm run dev (${dir})`);
    }
  }
  const sources = new Map<string, string>();
  for (const [lower, entry] of flat) if (entry.source) sources.set(lower, entry.source);

  // unknown keys refuse Production like any other problem, unless explicitly allowed
  const allowUnknown = /^true$/i.test(String(flat.get("configuration:allowunknownkeys")?.value ?? "").trim());
  const refuseUnknown = environment === "Production" && !allowUnknown;
  const problems: ConfigProblem[] = [...files.problems, ...(refuseUnknown ? unknown : [])];
  const warnings = refuseUnknown ? [] : unknown;

  const parsed = configSchema.safeParse(build(schemaTree, "", flat));
  if (!parsed.success) {
    throw new ConfigError(
      [
        ...problems,
        ...parsed.error.issues.map((issue) => problemOf(issue.path, issue.code, issue.message)),
      ].map((problem) => withSource(problem, sources)),
      environment,
    );
  }
  const settings = parsed.data;
  const metricsPort = settings.OpenTelemetry.Prometheus.Port;
  if (metricsPort !== undefined && metricsPort === settings.Server.Port)
    problems.push({
      key: "OpenTelemetry:Prometheus:Port",
      problem: `equals Server:Port (${metricsPort}): /metrics has a listener of its own, never the API's; choose another port`,
    });

  const embeddedFallback = options.embeddedFallback === true;
  const { database, directUrl } = resolveDatabase(settings, env, environment, embeddedFallback, problems);
  const { cache, token } = resolveCache(settings, env);
  const urls = [database?.url, directUrl, cache?.url];

  const config: AppConfig = {
    environment,
    settings,
    // a missing database already made `problems` non-empty, which throws below
    database: database ?? { url: "", source: "development default", embedded: false, poolMode: "session" },
    cache,
    secretValues: secretValuesOf(settings, env, urls, token),
    sources,
    warnings,
    webhookTrustedCa: readTrustedCa(settings.Webhooks.TrustedCaFile, problems),
    emailTrustedCa: readTrustedCa(settings.Email.Smtp.TrustedCaFile, problems, "Email:Smtp:TrustedCaFile"),
  };
  if (environment === "Production" && options.process !== "migrator")
    problems.push(...checkProduction(config));
  if (problems.length > 0)
    throw new ConfigError(
      problems.map((problem) => withSource(problem, sources)),
      environment,
    );
  return config;
}

/**
 * A problem of a secret key (whose value is never shown) that came from a differently named
 * variable (`PLINTH_*`, `…_FILE`) names that variable too: the operator looks for what they set.
 */
function withSource(problem: ConfigProblem, sources: Map<string, string>): ConfigProblem {
  const source = isSecretKey(problem.key) ? sources.get(problem.key.toLowerCase()) : undefined;
  return source ? { key: problem.key, problem: `${problem.problem} (set by ${source})` } : problem;
}
