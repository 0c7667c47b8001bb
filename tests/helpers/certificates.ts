import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestCertificates {
  dir: string;
  /** PKCS#12 with `password` (as .NET operators export them). */
  pfxPath: string;
  /** Certificate and unencrypted private key in one PEM file. */
  pemPath: string;
  /** Certificate and private key encrypted with `password`, in one PEM file. */
  encryptedPemPath: string;
  password: string;
  cleanup(): void;
}

function openssl(args: string[]): void {
  const proc = Bun.spawnSync(["openssl", ...args], { stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`openssl ${args[0]} failed: ${proc.stderr.toString()}`);
}

/** A fresh self-signed RSA certificate made with openssl at test time: no key material is committed. */
export function makeTestCertificates(commonName = "plinth-test"): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), "plinth-cert-"));
  const password = `pw-${crypto.randomUUID()}`;
  const key = join(dir, "key.pem");
  const cert = join(dir, "cert.pem");
  openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key]);
  openssl(["req", "-new", "-x509", "-key", key, "-out", cert, "-days", "30", "-subj", `/CN=${commonName}`]);
  const pfxPath = join(dir, "cert.pfx");
  openssl([
    "pkcs12",
    "-export",
    "-inkey",
    key,
    "-in",
    cert,
    "-out",
    pfxPath,
    "-passout",
    `pass:${password}`,
    "-keypbe",
    "AES-256-CBC",
    "-certpbe",
    "AES-256-CBC",
    "-macalg",
    "sha256",
  ]);
  const pemPath = join(dir, "combined.pem");
  writeFileSync(pemPath, readFileSync(cert, "utf8") + readFileSync(key, "utf8"));
  const encryptedKey = join(dir, "key.enc.pem");
  openssl([
    "pkcs8",
    "-topk8",
    "-in",
    key,
    "-out",
    encryptedKey,
    "-v2",
    "aes-256-cbc",
    "-passout",
    `pass:${password}`,
  ]);
  const encryptedPemPath = join(dir, "combined.enc.pem");
  writeFileSync(encryptedPemPath, readFileSync(cert, "utf8") + readFileSync(encryptedKey, "utf8"));
  return {
    dir,
    pfxPath,
    pemPath,
    encryptedPemPath,
    password,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
