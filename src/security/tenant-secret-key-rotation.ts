import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { envValue, type RotationResult, refused, rewriteOwnedLines, writeKeyFile } from "./env-file-keys.ts";

/**
 * `bun run keys:generate --rotate tenant-secrets --out DIR [--retire]`: the two roll-outs of the
 * tenant-secret master key (docs/secrets-and-storage.md, "Runbook: rotate the tenant-secret master
 * key") on a folder `keys:generate` made.
 *
 * - `publish` (no flag): a new 32-byte master key under a new key id becomes current; the old key
 *   stays as `PreviousKeys__0` so the secrets sealed under it still open. Then `secrets:rotate`
 *   re-seals them under the new key.
 * - `retire`: `PreviousKeys` removed, once `secrets:rotate` exited 0; the old key file is named to
 *   destroy.
 */
export type TenantKeyStep = "publish" | "retire";

const KEY_ID = "PLINTH_TENANT_SECRET_KEY_ID";
const KEY_FILE = "PLINTH_TENANT_SECRET_MASTER_KEY_FILE";
const PREVIOUS = "Security__TenantSecrets__PreviousKeys__";
const OWNED =
  /^(PLINTH_TENANT_SECRET_KEY_ID|PLINTH_TENANT_SECRET_MASTER_KEY_FILE|Security__TenantSecrets__PreviousKeys__\d+__(KeyId|MasterKey_FILE))=/;

interface TenantKeyLines {
  keyId: string;
  keyFile: string;
  previous: { keyId: string; keyFile: string }[];
}

function read(lines: string[]): TenantKeyLines | string {
  const keyId = envValue(lines, KEY_ID);
  const keyFile = envValue(lines, KEY_FILE);
  if (!keyId || !keyFile)
    return `production.env has no ${KEY_ID} and ${KEY_FILE} (keys:generate writes them)`;
  const previous: TenantKeyLines["previous"] = [];
  for (let i = 0; ; i++) {
    const id = envValue(lines, `${PREVIOUS}${i}__KeyId`);
    const file = envValue(lines, `${PREVIOUS}${i}__MasterKey_FILE`);
    if (!id && !file) break;
    if (!id || !file) return `production.env: ${PREVIOUS}${i} needs both KeyId and MasterKey_FILE`;
    previous.push({ keyId: id, keyFile: file });
  }
  return { keyId, keyFile, previous };
}

function render(keys: TenantKeyLines): string[] {
  return [
    `${KEY_ID}=${keys.keyId}`,
    `${KEY_FILE}=${keys.keyFile}`,
    ...keys.previous.flatMap((p, i) => [
      `${PREVIOUS}${i}__KeyId=${p.keyId}`,
      `${PREVIOUS}${i}__MasterKey_FILE=${p.keyFile}`,
    ]),
  ];
}

/** ts-<date> (the file tenant-secrets-<date>.key), else ts-<date>-2, -3, … never one in use or on disk. */
function nextKey(dir: string, now: Date, taken: string[]): { keyId: string; file: string } {
  const date = now.toISOString().slice(0, 10);
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? date : `${date}-${n}`;
    const keyId = `ts-${suffix}`;
    const file = `tenant-secrets-${suffix}.key`;
    if (!taken.includes(keyId) && !existsSync(join(dir, file))) return { keyId, file };
  }
}

/** One step of the tenant-secret key rotation in `out`; never overwrites a key file, never prints a key. */
export function rotateTenantSecretKey(out: string, step: TenantKeyStep, now = new Date()): RotationResult {
  const dir = resolve(out);
  const envPath = join(dir, "production.env");
  if (!existsSync(envPath)) return refused(`${envPath} does not exist (run keys:generate first)`);
  const lines = readFileSync(envPath, "utf8").split("\n");
  const keys = read(lines);
  if (typeof keys === "string") return refused(keys);
  const command = `bun run keys:generate --rotate tenant-secrets --out ${dir}`;
  if (step === "retire") {
    if (keys.previous.length === 0) return refused("no previous tenant-secret key to retire");
    return rewriteOwnedLines({
      envPath,
      lines,
      owned: OWNED,
      before: render(keys),
      after: render({ ...keys, previous: [] }),
      written: [],
      nextStep: `Restart every replica, then destroy the old master key: ${keys.previous.map((p) => p.keyFile).join(" ")}`,
    });
  }
  if (keys.previous.length > 0)
    return refused(
      `a rotation is in progress (previous key ${keys.previous.map((p) => p.keyId).join(", ")}): run bun run secrets:rotate until it exits 0, then ${command} --retire`,
    );
  const next = nextKey(dir, now, [keys.keyId]);
  const written = [writeKeyFile(dir, next.file, `${randomBytes(32).toString("base64")}\n`)];
  return rewriteOwnedLines({
    envPath,
    lines,
    owned: OWNED,
    before: render(keys),
    after: render({
      keyId: next.keyId,
      keyFile: join(dir, next.file),
      previous: [{ keyId: keys.keyId, keyFile: keys.keyFile }],
    }),
    written,
    nextStep: [
      `Restart every replica with these settings: new secrets are sealed under ${next.keyId}, those under ${keys.keyId} still open.`,
      "Then, with the same settings, run: bun run secrets:rotate (until it exits 0; docs/secrets-and-storage.md lists its exit codes)",
      `Only after exit 0: ${command} --retire`,
    ].join("\n"),
  });
}
