import { generateKeyPairSync, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { isHostName, isHttpOrigin } from "./config/production.ts";
import { dataProtectionCertificate } from "./security/data-protection-certificate.ts";
import { rotateJwt } from "./security/jwt-key-rotation.ts";
import { rotateKey } from "./security/key-rotation-steps.ts";
import { checkpointKeyPair, ROTATED_KEYS } from "./security/rotated-keys.ts";

/**
 * `bun run keys:generate --out DIR --host HOST`: every key a Production install needs, each in its
 * own file (mode 0600), and DIR/production.env with every Production setting that is not a
 * connection string, secrets only by `<VARIABLE>_FILE` reference. Never overwrites a file.
 */

export const EXIT = {
  ok: 0,
  /** A file to be written exists already (nothing was written), or writing failed. */
  refused: 1,
  usage: 64,
} as const;

const HELP = `Usage: bun run keys:generate --out DIR --host HOST [--origin ORIGIN]
       bun run keys:generate --rotate jwt --out DIR [--switch | --retire]
       bun run keys:generate --rotate NAME --out DIR [--retire]

Writes into DIR (created if absent, mode 0700), each file mode 0600:
  jwt-<date>.key.pem / .pub.pem    RSA 3072 JWT signing key pair, key id jwt-<date>
  data-protection.pfx              PKCS#12 data-protection certificate (RSA 3072, 10 years)
  data-protection.password         its password
  tenant-secrets-<date>.key        32-byte tenant-secret master key (Base64), key id ts-<date>
  sms-code-pepper                  SMS code pepper
  audit-checkpoint-<date>.key.pem / .pub.pem
                                   Ed25519 key pair that signs audit checkpoints (docs/audit.md)
  production.env                   every Production setting that is not a connection string;
                                   secrets only as <VARIABLE>_FILE paths to the files above

Load it with \`set -a; . DIR/production.env; set +a\`, add DATABASE_URL and CACHE_URL, then run
\`bun run migrate --bootstrap-platform-admin\` and \`bun run start\` (docs/runbooks/first-install.md).

Options:
  --out DIR        Folder for the keys (its path may hold only letters, digits and . _ / -).
  --host HOST      The API's public host name: platform host, allowed host, JWT issuer.
  --origin ORIGIN  The browser app's origin for CORS and cookie sign-in (default https://HOST).
  --help           Show this help.

Refuses to overwrite: if any of these files exists, nothing is written.

--rotate jwt works on a DIR this command made (docs/runbooks/key-rotation.md), one roll-out at a time;
each step rewrites only the JWT key lines of DIR/production.env and prints them:
  (no flag)  writes the next key pair (jwt-<date>[-N].key.pem / .pub.pem) beside the current one and
             adds its public half as Security__Jwt__VerificationKeys__0 (signing is unchanged)
  --switch   signs with that key; the old key's public half stays a verification key
  --retire   removes the old key's verification entry (after Security:Jwt:AccessTokenMinutes)

--rotate NAME (tenant-secrets, data-protection, sms-code-pepper, audit-checkpoint) writes the
next key beside the current one and rewrites only its lines (docs/secrets-and-storage.md):
  (no flag)  the new key becomes current; tenant-secrets and data-protection keep the old one as
             PreviousKeys__0 / PreviousCertificates__0 until the re-seal command (bun run
             secrets:rotate, bun run secrets:rotate --data-protection) exits 0; the pepper and the
             audit checkpoint key are replaced at once
  --retire   removes the previous key (only after the re-seal exited 0); names its files

Exit codes: 0 written; 1 a file exists already or cannot be written (nothing or, on a write
failure, part was written), or a rotation step that does not follow the last one (nothing
changed); 64 bad usage.
`;

export interface GenerateOptions {
  out: string;
  host: string;
  origin?: string;
  now?: Date;
}

interface Output {
  name: string;
  content: string | Buffer;
}

/** The files keys:generate writes, by name (DIR-relative), in writing order. */
export function generateKeyFiles(options: GenerateOptions): Output[] {
  const now = options.now ?? new Date();
  const date = now.toISOString().slice(0, 10);
  const dir = resolve(options.out);
  const host = options.host.toLowerCase();
  const origin = (options.origin ?? `https://${host}`).replace(/\/$/, "");
  const jwtKeyId = `jwt-${date}`;
  const tenantKeyId = `ts-${date}`;
  const jwt = generateKeyPairSync("rsa", { modulusLength: 3072 });
  const checkpoint = checkpointKeyPair();
  const certificatePassword = randomBytes(24).toString("base64url");
  const files = {
    jwtPrivate: `${jwtKeyId}.key.pem`,
    jwtPublic: `${jwtKeyId}.pub.pem`,
    certificate: "data-protection.pfx",
    certificatePassword: "data-protection.password",
    masterKey: `tenant-secrets-${date}.key`,
    pepper: "sms-code-pepper",
    checkpointPrivate: `audit-checkpoint-${date}.key.pem`,
    checkpointPublic: `audit-checkpoint-${date}.pub.pem`,
  };
  const path = (name: string) => join(dir, name);
  const env = [
    `# Plinth Production settings for ${host}, made by \`bun run keys:generate\` on ${date}.`,
    "# Load with: set -a; . THIS_FILE; set +a  — then add DATABASE_URL and CACHE_URL (or their _FILE).",
    "# Secrets are not in this file: each *_FILE names the file holding one (mode 0600).",
    "PLINTH_ENVIRONMENT=Production",
    `Security__Jwt__Issuer=https://${host}`,
    "Security__Jwt__Audience=plinth-api",
    `Security__Jwt__CurrentKeyId=${jwtKeyId}`,
    `Security__Jwt__PrivateKey_FILE=${path(files.jwtPrivate)}`,
    "PLINTH_DATA_PROTECTION_APPLICATION_NAME=plinth",
    `PLINTH_DATA_PROTECTION_CERTIFICATE_PATH=${path(files.certificate)}`,
    `PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD_FILE=${path(files.certificatePassword)}`,
    `PLINTH_TENANT_SECRET_KEY_ID=${tenantKeyId}`,
    `PLINTH_TENANT_SECRET_MASTER_KEY_FILE=${path(files.masterKey)}`,
    `PLINTH_SMS_CODE_PEPPER_FILE=${path(files.pepper)}`,
    `Audit__Checkpoints__KeyId=audit-checkpoint-${date}`,
    `Audit__Checkpoints__SigningKey_FILE=${path(files.checkpointPrivate)}`,
    `Tenancy__Resolution__PlatformHost=${host}`,
    `AllowedHosts__0=${host}`,
    `Cors__Origins__0=${origin}`,
    ...["GET", "POST", "PUT", "PATCH", "DELETE"].map((m, i) => `Cors__Methods__${i}=${m}`),
    // the browser flows of docs/auth.md: a credentialed sign-in, then the CSRF header on every change
    ...["authorization", "content-type", "x-tenant", "x-csrf-token"].map(
      (h, i) => `Cors__Headers__${i}=${h}`,
    ),
    "Cors__AllowCredentials=true",
    `BrowserAuth__AllowedOrigins__0=${origin}`,
    "RateLimiting__Global__PermitLimit=600",
    "RateLimiting__Global__WindowSeconds=60",
    "RateLimiting__Auth__PermitLimit=30",
    "RateLimiting__Auth__WindowSeconds=60",
    "",
  ].join("\n");
  return [
    { name: files.jwtPrivate, content: jwt.privateKey.export({ type: "pkcs8", format: "pem" }).toString() },
    { name: files.jwtPublic, content: jwt.publicKey.export({ type: "spki", format: "pem" }).toString() },
    {
      name: files.certificate,
      content: dataProtectionCertificate(`${host} data protection`, certificatePassword, now),
    },
    { name: files.certificatePassword, content: `${certificatePassword}\n` },
    { name: files.masterKey, content: `${randomBytes(32).toString("base64")}\n` },
    { name: files.pepper, content: `${randomBytes(32).toString("base64url")}\n` },
    { name: files.checkpointPrivate, content: checkpoint.privatePem },
    { name: files.checkpointPublic, content: checkpoint.publicPem },
    { name: "production.env", content: env },
  ];
}

/** Writes the files; returns an exit code and what to tell the operator (never a key). */
export function writeKeyFiles(options: GenerateOptions): { code: number; message: string } {
  const dir = resolve(options.out);
  const outputs = generateKeyFiles(options);
  const existing = outputs.map((o) => join(dir, o.name)).filter((p) => existsSync(p));
  if (existing.length > 0)
    return {
      code: EXIT.refused,
      message: `Refusing to overwrite existing files; nothing was written:\n${existing.map((p) => `  ${p}`).join("\n")}\n`,
    };
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const output of outputs) {
      const path = join(dir, output.name);
      writeFileSync(path, output.content, { mode: 0o600, flag: "wx" });
      chmodSync(path, 0o600); // whatever the umask
    }
  } catch (error) {
    return { code: EXIT.refused, message: `Writing the keys failed: ${(error as Error).message}\n` };
  }
  return {
    code: EXIT.ok,
    message: `Wrote ${outputs.length} files to ${dir} (mode 0600):\n${outputs.map((o) => `  ${o.name}`).join("\n")}\nNext: set -a; . ${join(dir, "production.env")}; set +a — then DATABASE_URL and CACHE_URL (docs/runbooks/first-install.md).\n`,
  };
}

function main(argv: string[]): number {
  let options: GenerateOptions;
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        out: { type: "string" },
        host: { type: "string" },
        origin: { type: "string" },
        rotate: { type: "string" },
        switch: { type: "boolean", default: false },
        retire: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(HELP);
      return EXIT.ok;
    }
    if (values.rotate !== undefined || values.switch || values.retire) {
      const key = ROTATED_KEYS.get(values.rotate ?? "");
      if (values.rotate !== "jwt" && !key)
        throw new Error(`--rotate takes one of: jwt, ${[...ROTATED_KEYS.keys()].join(", ")}`);
      if (!values.out) throw new Error(`--rotate ${values.rotate} needs --out DIR`);
      if (values.switch && values.retire) throw new Error("--switch and --retire exclude each other");
      if (values.switch && key)
        throw new Error(`--switch is a JWT step; ${values.rotate} has publish (no flag) and --retire`);
      if (values.host || values.origin)
        throw new Error("--host and --origin are for a new folder, not --rotate");
      const { code, message } = key
        ? rotateKey(key, values.out, values.retire ? "retire" : "publish")
        : rotateJwt(values.out, values.switch ? "switch" : values.retire ? "retire" : "publish");
      (code === EXIT.ok ? process.stdout : process.stderr).write(message);
      return code;
    }
    if (!values.out || !values.host) throw new Error("--out and --host are required");
    // production.env is read by a shell: the paths in it must need no quoting
    if (!/^[A-Za-z0-9._/-]+$/.test(resolve(values.out)))
      throw new Error("--out: the folder's path may hold only letters, digits and . _ / -");
    if (!isHostName(values.host)) throw new Error("--host must be a host name (no scheme, port or path)");
    if (values.origin !== undefined && !isHttpOrigin(values.origin))
      throw new Error("--origin must be an http(s) origin (scheme://host[:port])");
    options = { out: values.out, host: values.host, ...(values.origin ? { origin: values.origin } : {}) };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}`);
    return EXIT.usage;
  }
  const { code, message } = writeKeyFiles(options);
  (code === EXIT.ok ? process.stdout : process.stderr).write(message);
  return code;
}

if (import.meta.main) {
  process.exit(main(process.argv.slice(2)));
}
