import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import forge from "node-forge";

export interface TestCertificates {
  dir: string;
  /** PKCS#12 with `password` (as .NET operators export them). */
  pfxPath: string;
  /** Certificate and unencrypted private key in one PEM file. */
  pemPath: string;
  /** The certificate alone and the unencrypted private key alone (PEM), e.g. for a TLS server. */
  certPath: string;
  keyPath: string;
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
    certPath: cert,
    keyPath: key,
    encryptedPemPath,
    password,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface ChainCertificates {
  dir: string;
  password: string;
  /** PKCS#12 listing the CA certificate before the leaf the key belongs to. */
  caFirstPfxPath: string;
  /** PEM: CA certificate, leaf certificate, then the leaf's key. */
  caFirstPemPath: string;
  /** PKCS#12 with the leaf's key but only the CA certificate: no certificate matches the key. */
  mismatchedPfxPath: string;
  /** The leaf's subject, to check which certificate was picked. */
  leafSubject: string;
  cleanup(): void;
}

/** A CA and a leaf signed by it (RSA, made with openssl at test time), packed as chain files. */
export function makeChainCertificates(): ChainCertificates {
  const dir = mkdtempSync(join(tmpdir(), "plinth-chain-"));
  const password = `pw-${crypto.randomUUID()}`;
  const path = (name: string) => join(dir, name);
  openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path("ca.key")]);
  openssl(
    ["req", "-new", "-x509", "-key", path("ca.key"), "-out", path("ca.pem"), "-days", "30"].concat([
      "-subj",
      "/CN=plinth-test-ca",
    ]),
  );
  openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path("leaf.key")]);
  openssl([
    "req",
    "-new",
    "-key",
    path("leaf.key"),
    "-out",
    path("leaf.csr"),
    "-subj",
    "/CN=plinth-test-leaf",
  ]);
  openssl([
    "x509",
    "-req",
    "-in",
    path("leaf.csr"),
    "-CA",
    path("ca.pem"),
    "-CAkey",
    path("ca.key"),
    "-CAcreateserial",
    "-out",
    path("leaf.pem"),
    "-days",
    "30",
  ]);
  const key = forge.pki.privateKeyFromPem(readFileSync(path("leaf.key"), "utf8"));
  const ca = forge.pki.certificateFromPem(readFileSync(path("ca.pem"), "utf8"));
  const leaf = forge.pki.certificateFromPem(readFileSync(path("leaf.pem"), "utf8"));
  const pfx = (certificates: forge.pki.Certificate[]) =>
    Buffer.from(
      forge.asn1
        .toDer(forge.pkcs12.toPkcs12Asn1(key, certificates, password, { algorithm: "aes256" }))
        .getBytes(),
      "binary",
    );
  writeFileSync(path("chain.pfx"), pfx([ca, leaf]));
  writeFileSync(path("mismatch.pfx"), pfx([ca]));
  writeFileSync(
    path("chain.pem"),
    readFileSync(path("ca.pem"), "utf8") +
      readFileSync(path("leaf.pem"), "utf8") +
      readFileSync(path("leaf.key"), "utf8"),
  );
  return {
    dir,
    password,
    caFirstPfxPath: path("chain.pfx"),
    caFirstPemPath: path("chain.pem"),
    mismatchedPfxPath: path("mismatch.pfx"),
    leafSubject: "CN=plinth-test-leaf",
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A self-signed EC (P-256) certificate, as PEM (cert + key) and PKCS#12 with `password`. */
export function makeEcCertificate(): {
  dir: string;
  pemPath: string;
  pfxPath: string;
  password: string;
  cleanup(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), "plinth-ec-"));
  const password = `pw-${crypto.randomUUID()}`;
  const key = join(dir, "key.pem");
  const cert = join(dir, "cert.pem");
  openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key]);
  openssl(["req", "-new", "-x509", "-key", key, "-out", cert, "-days", "30", "-subj", "/CN=plinth-test-ec"]);
  const pemPath = join(dir, "ec.pem");
  writeFileSync(pemPath, readFileSync(cert, "utf8") + readFileSync(key, "utf8"));
  const pfxPath = join(dir, "ec.pfx");
  openssl(["pkcs12", "-export", "-inkey", key, "-in", cert, "-out", pfxPath, "-passout", `pass:${password}`]);
  return { dir, pemPath, pfxPath, password, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
