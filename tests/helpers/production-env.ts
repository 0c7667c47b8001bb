import { execFileSync } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestKeys {
  privateKeyPem: string;
  publicKeyPem: string;
}

/** A fresh RSA key pair, made at test time (no key material is committed). */
export function rsaKeys(bits = 2048): TestKeys {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: bits });
  return {
    privateKeyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

/** A self-signed certificate with its key, as PKCS#12 (with password) and as PEM, made with openssl. */
export function testCertificate(password: string): { pfxPath: string; pemPath: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "plinth-cert-"));
  const key = join(dir, "key.pem");
  const cert = join(dir, "cert.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "2",
      "-subj",
      "/CN=plinth-test",
    ],
    { stdio: "ignore" },
  );
  const pfxPath = join(dir, "dp.pfx");
  execFileSync(
    "openssl",
    ["pkcs12", "-export", "-inkey", key, "-in", cert, "-out", pfxPath, "-passout", `pass:${password}`],
    { stdio: "ignore" },
  );
  const pemPath = join(dir, "dp.pem");
  execFileSync("sh", ["-c", `cat "${cert}" "${key}" > "${pemPath}"`]);
  return { pfxPath, pemPath, dir };
}

/** Environment variables of a Production configuration that passes every start-up check. */
let material:
  | { jwt: TestKeys; certPassword: string; certificate: ReturnType<typeof testCertificate> }
  | undefined;

export function validProductionEnv(
  overrides: Record<string, string | undefined> = {},
): Record<string, string | undefined> {
  if (!material) {
    const certPassword = `cert-${randomBytes(6).toString("hex")}`;
    material = { jwt: rsaKeys(), certPassword, certificate: testCertificate(certPassword) };
  }
  const { jwt, certPassword, certificate } = material;
  return {
    PLINTH_ENVIRONMENT: "Production",
    DATABASE_URL: "postgres://plinth:db-password-123@127.0.0.1:5432/plinth",
    CACHE_URL: "redis://:cache-password-456@127.0.0.1:6379",
    Security__Jwt__Issuer: "https://auth.example.com",
    Security__Jwt__Audience: "plinth-api",
    Security__Jwt__CurrentKeyId: "k1",
    Security__Jwt__PrivateKey: jwt.privateKeyPem,
    Security__Jwt__VerificationKeys__0__KeyId: "k1",
    Security__Jwt__VerificationKeys__0__PublicKey: jwt.publicKeyPem,
    PLINTH_DATA_PROTECTION_APPLICATION_NAME: "plinth",
    PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certificate.pfxPath,
    PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: certPassword,
    PLINTH_TENANT_SECRET_KEY_ID: "tk1",
    PLINTH_TENANT_SECRET_MASTER_KEY: randomBytes(32).toString("base64"),
    PLINTH_SMS_CODE_PEPPER: randomBytes(24).toString("base64"),
    Tenancy__Resolution__PlatformHost: "api.example.com",
    Tenancy__Resolution__TrustedProxies__0: "10.0.0.0/8",
    Tenancy__Resolution__TenantCodePaths__0: "/t/",
    AllowedHosts__0: "api.example.com",
    Cors__Origins__0: "https://app.example.com",
    Cors__Methods__0: "GET",
    Cors__Methods__1: "POST",
    Cors__Headers__0: "content-type",
    Cors__AllowCredentials: "true",
    BrowserAuth__AllowedOrigins__0: "https://app.example.com",
    RateLimiting__Global__PermitLimit: "100",
    RateLimiting__Global__WindowSeconds: "60",
    RateLimiting__Auth__PermitLimit: "10",
    RateLimiting__Auth__WindowSeconds: "60",
    ...overrides,
  };
}

/** A PEM-shaped string that is not a key (for parse-failure and redaction tests). */
export function fakePem(body: string): string {
  const label = ["PRIVATE", "KEY"].join(" ");
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----`;
}
