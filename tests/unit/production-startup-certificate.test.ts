import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { constants, generateKeyPairSync, privateDecrypt, publicEncrypt, randomBytes } from "node:crypto";
import { ConfigError } from "../../src/config/config-error.ts";
import { loadConfig } from "../../src/config/load.ts";
import { loadCertificate } from "../../src/security/certificates.ts";
import {
  type ChainCertificates,
  makeChainCertificates,
  makeEcCertificate,
  makeTestCertificates,
  type TestCertificates,
} from "../helpers/certificates.ts";

let certs: TestCertificates;
let chain: ChainCertificates;
let ec: ReturnType<typeof makeEcCertificate>;
beforeAll(() => {
  certs = makeTestCertificates();
  chain = makeChainCertificates();
  ec = makeEcCertificate();
});
afterAll(() => {
  certs.cleanup();
  chain.cleanup();
  ec.cleanup();
});

function productionEnv(): Record<string, string | undefined> {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return {
    PLINTH_ENVIRONMENT: "Production",
    DATABASE_URL: "postgres://plinth@db.internal:5432/plinth",
    CACHE_URL: "redis://cache.internal:6379",
    Security__Jwt__Issuer: "https://plinth.example",
    Security__Jwt__Audience: "plinth",
    Security__Jwt__CurrentKeyId: "jwt-1",
    Security__Jwt__PrivateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    PLINTH_DATA_PROTECTION_APPLICATION_NAME: "plinth",
    PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certs.pfxPath,
    PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: certs.password,
    PLINTH_TENANT_SECRET_KEY_ID: "ts-1",
    PLINTH_TENANT_SECRET_MASTER_KEY: randomBytes(32).toString("base64"),
    PLINTH_SMS_CODE_PEPPER: randomBytes(32).toString("hex"),
    Tenancy__Resolution__PlatformHost: "app.plinth.example",
    AllowedHosts__0: "app.plinth.example",
    RateLimiting__Global__PermitLimit: "100",
    RateLimiting__Global__WindowSeconds: "60",
    RateLimiting__Auth__PermitLimit: "10",
    RateLimiting__Auth__WindowSeconds: "60",
  };
}

function problemsOf(env: Record<string, string | undefined>): { key: string; problem: string }[] {
  try {
    loadConfig({ env, configDir: "/nonexistent" });
  } catch (error) {
    if (error instanceof ConfigError) {
      expect(error.message).toStartWith("Refusing to start in Production");
      for (const value of [
        env.PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD,
        env.PLINTH_TENANT_SECRET_MASTER_KEY,
      ])
        if (value) expect(error.message).not.toContain(value);
      return error.problems;
    }
    throw error;
  }
  return [];
}

describe("Production start-up and the data-protection certificate", () => {
  test("otherwise valid settings with a readable certificate start", () => {
    expect(problemsOf(productionEnv())).toEqual([]);
    const pem = { ...productionEnv(), PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certs.encryptedPemPath };
    expect(problemsOf(pem)).toEqual([]);
  });

  test("a wrong certificate password is refused, by key", () => {
    const env = { ...productionEnv(), PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: "not-the-password" };
    expect(problemsOf(env)).toEqual([
      {
        key: "Security:DataProtection:CertificatePath",
        problem: "cannot be opened with the configured password",
      },
    ]);
    const pem = { ...env, PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: certs.encryptedPemPath };
    expect(problemsOf(pem).map((p) => p.key)).toEqual(["Security:DataProtection:CertificatePath"]);
  });

  test("no certificate configured, or a path that does not exist, is refused, by key", () => {
    const none = { ...productionEnv(), PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: undefined };
    expect(problemsOf(none)).toEqual([
      { key: "Security:DataProtection:CertificatePath", problem: "is required in Production" },
    ]);
    const missing = {
      ...productionEnv(),
      PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: `${certs.dir}/absent.pfx`,
    };
    expect(problemsOf(missing)).toEqual([
      {
        key: "Security:DataProtection:CertificatePath",
        problem: `file cannot be read: ${certs.dir}/absent.pfx`,
      },
    ]);
  });

  test("a retired data-protection certificate that cannot be opened is refused, by key", () => {
    const env = {
      ...productionEnv(),
      Security__DataProtection__PreviousCertificates__0__Path: certs.pfxPath,
      Security__DataProtection__PreviousCertificates__0__Password: "wrong-password",
    };
    expect(problemsOf(env)).toEqual([
      {
        key: "Security:DataProtection:PreviousCertificates:0:Path",
        problem: "cannot be opened with the configured password",
      },
    ]);
    const ok = { ...env, Security__DataProtection__PreviousCertificates__0__Password: certs.password };
    expect(problemsOf(ok)).toEqual([]);
  });

  test("a retired tenant-secret master key of the wrong length is refused, by key", () => {
    const env = {
      ...productionEnv(),
      Security__TenantSecrets__PreviousKeys__0__KeyId: "ts-0",
      Security__TenantSecrets__PreviousKeys__0__MasterKey: randomBytes(16).toString("base64"),
    };
    expect(problemsOf(env)).toEqual([
      {
        key: "Security:TenantSecrets:PreviousKeys:0:MasterKey",
        problem:
          "must be Base64 of exactly 32 bytes (make one with `openssl rand -base64 32` or `bun run keys:generate`)",
      },
    ]);
  });

  test("a retired tenant-secret key id equal to the current one (or to another retired one) is refused, by key", () => {
    const current = productionEnv();
    const same = {
      ...current,
      Security__TenantSecrets__PreviousKeys__0__KeyId: current.PLINTH_TENANT_SECRET_KEY_ID,
      Security__TenantSecrets__PreviousKeys__0__MasterKey: randomBytes(32).toString("base64"),
    };
    expect(problemsOf(same)).toEqual([
      { key: "Security:TenantSecrets:PreviousKeys:0:KeyId", problem: "must differ from every other key id" },
    ]);
    const twice = {
      ...current,
      Security__TenantSecrets__PreviousKeys__0__KeyId: "ts-0",
      Security__TenantSecrets__PreviousKeys__0__MasterKey: randomBytes(32).toString("base64"),
      Security__TenantSecrets__PreviousKeys__1__KeyId: "ts-0",
      Security__TenantSecrets__PreviousKeys__1__MasterKey: randomBytes(32).toString("base64"),
    };
    expect(problemsOf(twice)).toEqual([
      { key: "Security:TenantSecrets:PreviousKeys:1:KeyId", problem: "must differ from every other key id" },
    ]);
  });

  test("a chain file listing the CA first starts, and the certificate used is the one the key belongs to", () => {
    for (const path of [chain.caFirstPfxPath, chain.caFirstPemPath]) {
      const env = {
        ...productionEnv(),
        PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: path,
        PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: chain.password,
      };
      expect(problemsOf(env)).toEqual([]);
      const loaded = loadCertificate(path, chain.password);
      expect(loaded.certificate.subject).toBe(chain.leafSubject);
      // what data protection does with it: wrap with the public key, unwrap with the private key
      const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" };
      const key = randomBytes(32);
      const wrapped = publicEncrypt({ key: loaded.publicKey, ...oaep }, key);
      expect(privateDecrypt({ key: loaded.privateKey, ...oaep }, wrapped)).toEqual(key);
    }
  });

  test("a PKCS#12 whose key matches none of its certificates is refused, by key", () => {
    const env = {
      ...productionEnv(),
      PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: chain.mismatchedPfxPath,
      PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: chain.password,
    };
    expect(problemsOf(env)).toEqual([
      {
        key: "Security:DataProtection:CertificatePath",
        problem: "private key matches no certificate in the file",
      },
    ]);
    const previous = {
      ...productionEnv(),
      Security__DataProtection__PreviousCertificates__0__Path: chain.mismatchedPfxPath,
      Security__DataProtection__PreviousCertificates__0__Password: chain.password,
    };
    expect(problemsOf(previous).map((p) => p.key)).toEqual([
      "Security:DataProtection:PreviousCertificates:0:Path",
    ]);
  });

  test("an EC certificate (PEM or PKCS#12) is refused at start-up: key wrapping needs RSA", () => {
    for (const path of [ec.pemPath, ec.pfxPath]) {
      const env = {
        ...productionEnv(),
        PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: path,
        PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: ec.password,
      };
      expect(problemsOf(env)).toEqual([
        {
          key: "Security:DataProtection:CertificatePath",
          problem: "must hold an RSA key (data protection wraps keys with RSA-OAEP), not ec",
        },
      ]);
    }
  });
});
