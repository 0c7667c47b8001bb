import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { envValue, type RotationResult, refused, rewriteOwnedLines } from "./env-file-keys.ts";

/**
 * `bun run keys:generate --rotate <name> --out DIR [--retire]` for a key that production.env names
 * in a few lines (a key id, a file): the next key is written beside the current one and its lines
 * take the current key's place. A key with a `previous` list keeps the old one there (so what was
 * sealed under it still opens) until the re-seal command has run; `--retire` then removes it. A key
 * without one is replaced at once (what it protects is short-lived). JWT has its own three steps
 * (jwt-key-rotation.ts).
 */
export interface RotatedKey {
  /** What `--rotate` calls it. */
  name: string;
  /** What the messages call it ("master key", "certificate"). */
  label: string;
  /** The current key's variables, in production.env's order; `file` where the value is a key file. */
  variables: readonly { name: string; file?: boolean }[];
  /** Where the old key stays while its data is re-sealed: `<prefix>N__<field>`, one field per variable. */
  previous?: { prefix: string; fields: readonly string[]; reseal: string };
  /** Writes the next key's files into `dir` (0600, never over a file): its values, and the paths written. */
  next(input: { dir: string; now: Date; current: readonly string[]; lines: readonly string[] }): {
    values: string[];
    written: string[];
  };
  /** What holds once every replica restarted with the new key. */
  afterRestart(next: readonly string[], old: readonly string[]): string;
  /** Where the runbook is. */
  runbook: string;
}

export type KeyStep = "publish" | "retire";

interface KeyLines {
  current: string[];
  previous: string[][];
}

function read(key: RotatedKey, lines: string[]): KeyLines | string {
  const current = key.variables.map((v) => envValue(lines, v.name) ?? "");
  if (current.some((v) => !v))
    return `production.env has no ${key.variables.map((v) => v.name).join(" and ")} (keys:generate writes them)`;
  const previous: string[][] = [];
  const list = key.previous;
  for (let i = 0; list; i++) {
    const values = list.fields.map((f) => envValue(lines, `${list.prefix}${i}__${f}`) ?? "");
    if (values.every((v) => !v)) break;
    if (values.some((v) => !v))
      return `production.env: ${list.prefix}${i} needs ${list.fields.join(" and ")}`;
    previous.push(values);
  }
  return { current, previous };
}

function render(key: RotatedKey, keys: KeyLines): string[] {
  const list = key.previous;
  return [
    ...key.variables.map((v, i) => `${v.name}=${keys.current[i]}`),
    ...(list
      ? keys.previous.flatMap((p, i) => list.fields.map((f, j) => `${list.prefix}${i}__${f}=${p[j]}`))
      : []),
  ];
}

function ownedLines(key: RotatedKey): RegExp {
  const names = key.variables.map((v) => v.name);
  const previous = key.previous ? [`${key.previous.prefix}\\d+__(${key.previous.fields.join("|")})`] : [];
  return new RegExp(`^(${[...names, ...previous].join("|")})=`);
}

/** The key files among a key's values (what to destroy once it is retired). */
const filesOf = (key: RotatedKey, values: readonly string[]) =>
  values.filter((_, i) => key.variables[i]?.file).join(" ");

/** One step of `key`'s rotation in `out`; never overwrites a key file, never prints a key. */
export function rotateKey(key: RotatedKey, out: string, step: KeyStep, now = new Date()): RotationResult {
  const dir = resolve(out);
  const envPath = join(dir, "production.env");
  if (!existsSync(envPath)) return refused(`${envPath} does not exist (run keys:generate first)`);
  const lines = readFileSync(envPath, "utf8").split("\n");
  const keys = read(key, lines);
  if (typeof keys === "string") return refused(keys);
  const command = `bun run keys:generate --rotate ${key.name} --out ${dir}`;
  const owned = ownedLines(key);
  const before = render(key, keys);
  if (step === "retire") {
    if (!key.previous)
      return refused(
        `--rotate ${key.name} keeps no previous ${key.label} (the new one replaced it): nothing to retire`,
      );
    const [old] = keys.previous;
    if (!old) return refused(`no previous ${key.label} to retire`);
    return rewriteOwnedLines({
      envPath,
      lines,
      owned,
      before,
      after: render(key, { ...keys, previous: [] }),
      written: [],
      nextStep: `Restart every replica, then destroy the old ${key.label}: ${keys.previous.map((p) => filesOf(key, p)).join(" ")}`,
    });
  }
  const [inProgress] = keys.previous;
  if (key.previous && inProgress)
    return refused(
      `a rotation is in progress (previous ${key.label} ${inProgress[0]}): run ${key.previous.reseal} until it exits 0, then ${command} --retire`,
    );
  const next = key.next({ dir, now, current: keys.current, lines });
  const restart = `Restart every replica with these settings: ${key.afterRestart(next.values, keys.current)}.`;
  return rewriteOwnedLines({
    envPath,
    lines,
    owned,
    before,
    after: render(key, { current: next.values, previous: key.previous ? [keys.current] : [] }),
    written: next.written,
    nextStep: (key.previous
      ? [
          restart,
          `Then, with the same settings, run: ${key.previous.reseal} (until it exits 0; ${key.runbook} lists its exit codes)`,
          `Only after exit 0: ${command} --retire`,
        ]
      : [restart, `Then destroy the old ${key.label}: ${filesOf(key, keys.current)}`]
    ).join("\n"),
  });
}
