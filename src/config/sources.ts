import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ConfigProblem } from "./config-error.ts";
import { environmentOverrides, environments } from "./schema.ts";
import { type SchemaNode, schemaTree, typesOf } from "./tree.ts";

/**
 * Checks of the configuration SOURCES (not of values): unknown keys in settings files and
 * `Section__Key` variables, settings files named with the wrong case, and `<VARIABLE>_FILE`
 * variables that read a secret from a mounted file (Docker/Kubernetes secrets).
 */

/** Variables that carry a secret outside the `Section__Key` form: each may be given as `<NAME>_FILE`. */
const SECRET_VARIABLES = new Set([
  "DATABASE_URL",
  "DATABASE_DIRECT_URL",
  "CACHE_URL",
  "CACHE_TOKEN",
  ...Object.entries(environmentOverrides)
    .filter(([, key]) => isSecretKey(key))
    .map(([variable]) => variable),
]);

/** Is `Section:Key` (array indices as numbers) a key the schema marks secret? */
export function isSecretKey(key: string): boolean {
  const path = key.split(":").map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
  return caseInsensitiveNode(path)?.secret === true;
}

function caseInsensitiveNode(path: readonly (string | number)[]): SchemaNode | undefined {
  let node: SchemaNode | undefined = schemaTree;
  for (const segment of path) {
    if (!node) return undefined;
    if (typeof segment === "number") node = node.items;
    else {
      const properties: Record<string, SchemaNode> = node.properties ?? {};
      const name = Object.keys(properties).find((n) => n.toLowerCase() === segment.toLowerCase());
      node = name === undefined ? undefined : properties[name];
    }
  }
  return node;
}

function variableKey(name: string): string {
  return name.split("__").join(":");
}

/**
 * Replaces every `<NAME>_FILE` variable of a secret by `<NAME>` holding the file's content (one
 * trailing newline trimmed). Both set, or an unreadable file, is a problem naming the variables and
 * the path (never the content). Returns the resolved environment and where each value came from.
 */
export function resolveFileVariables(env: Record<string, string | undefined>): {
  env: Record<string, string | undefined>;
  problems: ConfigProblem[];
  fromFile: Map<string, string>;
} {
  const out: Record<string, string | undefined> = { ...env };
  const problems: ConfigProblem[] = [];
  const fromFile = new Map<string, string>();
  for (const [name, path] of Object.entries(env)) {
    if (!name.endsWith("_FILE") || path === undefined || path === "") continue;
    const base = name.slice(0, -"_FILE".length);
    const readable =
      SECRET_VARIABLES.has(base) ||
      ((base.includes("__") || base.includes(":")) && isSecretKey(variableKey(base))) ||
      // a PEM public key is no secret, but as long: keys:generate --rotate jwt points at its file
      /^Security(__|:)Jwt(__|:)VerificationKeys(__|:)\d+(__|:)PublicKey$/i.test(base);
    if (!readable) continue;
    delete out[name];
    if (env[base] !== undefined && env[base] !== "") {
      problems.push({ key: `${base} and ${name}`, problem: "are both set: set only one of them" });
      continue;
    }
    try {
      out[base] = readFileSync(path, "utf8").replace(/\r?\n$/, "");
      fromFile.set(base, name);
    } catch {
      problems.push({ key: name, problem: `names a file that cannot be read: ${path}` });
    }
  }
  return { env: out, problems, fromFile };
}

/** Levenshtein distance, case-insensitive. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let previous = Array.from({ length: y.length + 1 }, (_, i) => i);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++)
      row[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (x[i - 1] === y[j - 1] ? 0 : 1),
      );
    previous = row;
  }
  return previous[y.length] ?? 0;
}

function closest(name: string, candidates: string[]): string | undefined {
  let best: { candidate: string; score: number } | undefined;
  for (const candidate of candidates) {
    const score = distance(name, candidate);
    if (!best || score < best.score) best = { candidate, score };
  }
  // a suggestion far from what was typed helps nobody
  return best && best.score <= Math.max(2, Math.floor(name.length / 3)) ? best.candidate : undefined;
}

/**
 * The first segment of `path` the schema does not know, with the closest known key; undefined when
 * the whole path is known. `path` is case-insensitive, like the configuration itself.
 */
export function unknownKey(path: string[]): { key: string; suggestion?: string } | undefined {
  let node: SchemaNode | undefined = schemaTree;
  const known: string[] = [];
  for (const segment of path) {
    if (!node) break;
    const types = typesOf(node);
    if (types.includes("array")) {
      if (!/^\d+$/.test(segment)) return { key: [...known, segment].join(":") };
      known.push(segment);
      node = node.items;
      continue;
    }
    const properties: Record<string, SchemaNode> = node.properties ?? {};
    const names = Object.keys(properties);
    const name = names.find((n) => n.toLowerCase() === segment.toLowerCase());
    if (name === undefined) {
      const guess = closest(segment, names);
      return {
        key: [...known, segment].join(":"),
        ...(guess ? { suggestion: [...known, guess].join(":") } : {}),
      };
    }
    known.push(name);
    node = properties[name];
  }
  return undefined;
}

function unknownProblem(where: string, path: string[]): ConfigProblem | undefined {
  const found = unknownKey(path);
  if (!found) return undefined;
  const hint = found.suggestion ? `: did you mean \`${found.suggestion}\`?` : "";
  return { key: where, problem: `is not a known configuration key (\`${found.key}\`)${hint}` };
}

function jsonPaths(value: unknown, prefix: string[], out: string[][]): void {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) jsonPaths(item, [...prefix, String(i)], out);
  } else if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (entries.length === 0 && prefix.length > 0) out.push(prefix);
    for (const [name, child] of entries) jsonPaths(child, [...prefix, name], out);
  } else out.push(prefix);
}

/** Unknown keys of one parsed settings file, each reported once per unknown segment. */
export function unknownFileKeys(fileLabel: string, parsed: unknown): ConfigProblem[] {
  const paths: string[][] = [];
  jsonPaths(parsed, [], paths);
  const seen = new Set<string>();
  const problems: ConfigProblem[] = [];
  for (const path of paths) {
    const found = unknownKey(path);
    if (!found || seen.has(found.key.toLowerCase())) continue;
    seen.add(found.key.toLowerCase());
    const problem = unknownProblem(`${fileLabel}: ${found.key}`, path);
    if (problem) problems.push({ key: `${fileLabel}: ${found.key}`, problem: problem.problem });
  }
  return problems;
}

/**
 * Unknown keys among `Section__Key` / `Section:Key` variables. Only variables whose first segment
 * is a known section are checked: other software's `FOO__BAR` variables are not ours to judge.
 */
export function unknownVariableKeys(env: Record<string, string | undefined>): ConfigProblem[] {
  const sections = Object.keys(schemaTree.properties ?? {}).map((s) => s.toLowerCase());
  const problems: ConfigProblem[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value === "") continue;
    if (!name.includes("__") && !name.includes(":")) continue;
    const path = variableKey(name).split(":");
    if (!sections.includes((path[0] ?? "").toLowerCase())) continue;
    const problem = unknownProblem(name, path);
    if (problem) problems.push(problem);
  }
  return problems;
}

/** Settings files whose names differ from an expected one only by case: they are never read. */
export function miscasedSettingsFiles(configDir: string): ConfigProblem[] {
  let names: string[];
  try {
    names = readdirSync(configDir);
  } catch {
    return [];
  }
  const expected = ["appsettings.json", ...environments.map((e) => `appsettings.${e}.json`)];
  const problems: ConfigProblem[] = [];
  for (const name of names) {
    if (expected.includes(name)) continue;
    const match = expected.find((e) => e.toLowerCase() === name.toLowerCase());
    if (match)
      problems.push({
        key: join(configDir, name),
        problem: `is not read: file names are case-sensitive, did you mean \`${match}\`?`,
      });
  }
  return problems;
}

/** A PEM given on one line with literal `\n` (as env files and CI variables often carry it). */
export function unescapePem(value: string): string {
  if (value.includes("-----BEGIN") && !value.includes("\n") && value.includes("\\n"))
    return value.replaceAll("\\r\\n", "\n").replaceAll("\\n", "\n");
  return value;
}
