import { chmodSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * What the `keys:generate --rotate` steps share: a production.env made by `keys:generate`, whose key
 * lines one tool owns. Key files are written 0600 and never overwritten; the env file is replaced in
 * one rename with the owned lines where they were and every other line as it was; what changed is
 * printed as a diff of settings (never a key).
 */
export interface RotationResult {
  code: 0 | 1;
  message: string;
}

export const refused = (why: string): RotationResult => ({ code: 1, message: `${why}; nothing changed\n` });

/** The value of `name=` among the env file's lines. */
export function envValue(lines: string[], name: string): string | undefined {
  return lines.find((l) => l.startsWith(`${name}=`))?.slice(name.length + 1);
}

/** Writes a new key file (mode 0600, refusing to overwrite one); returns its path. */
export function writeKeyFile(dir: string, name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content, { mode: 0o600, flag: "wx" });
  chmodSync(path, 0o600);
  return path;
}

/** Replaces the owned lines of `envPath` by `after` and says what changed, then `nextStep`. */
export function rewriteOwnedLines(input: {
  envPath: string;
  lines: string[];
  owned: RegExp;
  before: string[];
  after: string[];
  written: string[];
  nextStep: string;
}): RotationResult {
  const { envPath, lines, owned, before, after } = input;
  const at = lines.findIndex((l) => owned.test(l));
  const rewritten = lines.filter((l) => !owned.test(l));
  rewritten.splice(at < 0 ? rewritten.length : at, 0, ...after);
  const partial = `${envPath}.partial`;
  writeFileSync(partial, rewritten.join("\n"), { mode: 0o600 });
  chmodSync(partial, 0o600);
  renameSync(partial, envPath);
  const diff = [
    ...before.filter((l) => !after.includes(l)).map((l) => `  - ${l}`),
    ...after.filter((l) => !before.includes(l)).map((l) => `  + ${l}`),
  ];
  return {
    code: 0,
    message: [
      ...(input.written.length ? [`Wrote ${input.written.join(" and ")} (mode 0600).`] : []),
      `Changed in ${envPath} (- removed, + added):`,
      ...diff,
      input.nextStep,
      "",
    ].join("\n"),
  };
}

/** `<date>` of `now`, else `<date>-2`, `-3`, …: the first suffix `free` accepts (a new key's name). */
export function nextDatedSuffix(now: Date, free: (suffix: string) => boolean): string {
  const date = now.toISOString().slice(0, 10);
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? date : `${date}-${n}`;
    if (free(suffix)) return suffix;
  }
}
