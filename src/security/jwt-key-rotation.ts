import { generateKeyPairSync } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import {
  nextDatedSuffix,
  type RotationResult,
  refused,
  rewriteOwnedLines,
  writeKeyFile,
} from "./env-file-keys.ts";

/**
 * `bun run keys:generate --rotate jwt --out DIR [--switch | --retire]`: the three roll-outs of
 * docs/runbooks/key-rotation.md on a folder `keys:generate` made. Each step rewrites only the key
 * lines of DIR/production.env (`Security__Jwt__CurrentKeyId`, `__PrivateKey_FILE`,
 * `__VerificationKeys__N__*`) and prints the lines it changed: the settings to change wherever the
 * replicas read theirs from.
 *
 * - `publish` (no flag): a new key pair beside the current one; its public half verifies tokens.
 * - `switch`: sign with the published key; the old key's public half still verifies.
 * - `retire`: the old key no longer verifies (after `Security:Jwt:AccessTokenMinutes`).
 */
export type RotationStep = "publish" | "switch" | "retire";

const PREFIX = "Security__Jwt__";
/** The lines this tool owns; Issuer, Audience and the rest stay as they are. */
const OWNED = /^Security__Jwt__(CurrentKeyId|PrivateKey_FILE|VerificationKeys__\d+__(KeyId|PublicKey_FILE))=/;

interface JwtLines {
  currentKeyId: string;
  privateKeyFile: string;
  verification: { keyId: string; publicKeyFile: string }[];
}

/** The JWT lines of production.env, or why this tool cannot rotate them. */
function readJwtLines(lines: string[]): JwtLines | string {
  const value = (name: string) =>
    lines.find((l) => l.startsWith(`${PREFIX}${name}=`))?.slice(PREFIX.length + name.length + 1);
  const currentKeyId = value("CurrentKeyId");
  const privateKeyFile = value("PrivateKey_FILE");
  if (!currentKeyId || !privateKeyFile)
    return `production.env has no ${PREFIX}CurrentKeyId and ${PREFIX}PrivateKey_FILE (keys:generate writes them)`;
  const verification: JwtLines["verification"] = [];
  for (let i = 0; ; i++) {
    const keyId = value(`VerificationKeys__${i}__KeyId`);
    const publicKeyFile = value(`VerificationKeys__${i}__PublicKey_FILE`);
    if (!keyId && !publicKeyFile) break;
    if (!keyId || !publicKeyFile)
      return `production.env: ${PREFIX}VerificationKeys__${i} needs both KeyId and PublicKey_FILE`;
    verification.push({ keyId, publicKeyFile });
  }
  return { currentKeyId, privateKeyFile, verification };
}

function jwtLines(jwt: JwtLines): string[] {
  return [
    `${PREFIX}CurrentKeyId=${jwt.currentKeyId}`,
    `${PREFIX}PrivateKey_FILE=${jwt.privateKeyFile}`,
    ...jwt.verification.flatMap((v, i) => [
      `${PREFIX}VerificationKeys__${i}__KeyId=${v.keyId}`,
      `${PREFIX}VerificationKeys__${i}__PublicKey_FILE=${v.publicKeyFile}`,
    ]),
  ];
}

/** A key id with no files in `dir`: jwt-<date>, else jwt-<date>-2, -3, … */
function nextKeyId(dir: string, now: Date, taken: string): string {
  const free = (id: string) =>
    id !== taken && !existsSync(join(dir, `${id}.key.pem`)) && !existsSync(join(dir, `${id}.pub.pem`));
  return `jwt-${nextDatedSuffix(now, (s) => free(`jwt-${s}`))}`;
}

/** The JWT settings after `step`, the key files to write and what to do next; or why not. */
function plan(
  dir: string,
  jwt: JwtLines,
  step: RotationStep,
  now: Date,
): { next: JwtLines; newKeyId?: string; nextStep: string } | string {
  const command = `bun run keys:generate --rotate jwt --out ${dir}`;
  if (step === "publish") {
    if (jwt.verification.length > 0)
      return `a rotation is in progress (verification key ${jwt.verification.map((v) => v.keyId).join(", ")}): finish it with --switch, then --retire`;
    const id = nextKeyId(dir, now, jwt.currentKeyId);
    return {
      next: { ...jwt, verification: [{ keyId: id, publicKeyFile: join(dir, `${id}.pub.pem`) }] },
      newKeyId: id,
      nextStep: `Restart every replica with these settings; once all run them and external verifiers have refreshed their JWKS: ${command} --switch`,
    };
  }
  if (step === "switch") {
    const published = jwt.verification[0];
    if (jwt.verification.length !== 1 || !published || !existsSync(join(dir, `${published.keyId}.key.pem`)))
      return "no published key whose private key is in this folder (run --rotate jwt first)";
    const oldPublic = join(dir, `${jwt.currentKeyId}.pub.pem`);
    if (!existsSync(oldPublic)) return `${oldPublic} is missing: tokens signed before could not be verified`;
    return {
      next: {
        currentKeyId: published.keyId,
        privateKeyFile: join(dir, `${published.keyId}.key.pem`),
        verification: [{ keyId: jwt.currentKeyId, publicKeyFile: oldPublic }],
      },
      nextStep: `Restart every replica: new tokens carry kid ${published.keyId}, tokens signed before still verify. After Security:Jwt:AccessTokenMinutes (default 15) past the last restart: ${command} --retire`,
    };
  }
  if (jwt.verification.length === 0) return "no old key to retire";
  return {
    next: { ...jwt, verification: [] },
    nextStep: `Restart every replica, then destroy the old private key: ${jwt.verification.map((v) => join(dir, `${v.keyId}.key.pem`)).join(" ")}`,
  };
}

/** One step of the rotation in `out`; never overwrites a key file, never prints a key. */
export function rotateJwt(out: string, step: RotationStep, now = new Date()): RotationResult {
  const dir = resolve(out);
  const envPath = join(dir, "production.env");
  if (!existsSync(envPath)) return refused(`${envPath} does not exist (run keys:generate first)`);
  const lines = readFileSync(envPath, "utf8").split("\n");
  const jwt = readJwtLines(lines);
  if (typeof jwt === "string") return refused(jwt);
  const planned = plan(dir, jwt, step, now);
  if (typeof planned === "string") return refused(planned);
  const { next, newKeyId, nextStep } = planned;
  const written: string[] = [];
  if (newKeyId) {
    const pair = generateKeyPairSync("rsa", { modulusLength: 3072 });
    written.push(
      writeKeyFile(
        dir,
        `${newKeyId}.key.pem`,
        pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      ),
      writeKeyFile(
        dir,
        `${newKeyId}.pub.pem`,
        pair.publicKey.export({ type: "spki", format: "pem" }).toString(),
      ),
    );
  }
  return rewriteOwnedLines({
    envPath,
    lines,
    owned: OWNED,
    before: jwtLines(jwt),
    after: jwtLines(next),
    written,
    nextStep,
  });
}
