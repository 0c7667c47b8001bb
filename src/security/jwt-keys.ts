import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";

export interface JwtKeySettings {
  CurrentKeyId?: string | undefined;
  PrivateKey?: string | undefined;
  VerificationKeys: { KeyId: string; PublicKey: string }[];
}

export interface JwtKeyRing {
  currentKeyId: string;
  privateKey: KeyObject;
  /** Every key that verifies tokens, by kid; includes the current key's public half. */
  verificationKeys: Map<string, KeyObject>;
}

export interface KeyProblem {
  key: string;
  problem: string;
}

const MIN_RSA_BITS = 2048;

function rsaBits(key: KeyObject): number {
  return key.asymmetricKeyDetails?.modulusLength ?? 0;
}

/** Parses `Security:Jwt` keys (PEM; PKCS#8 or PKCS#1 private key). Returns the ring or every problem found. */
export function parseJwtKeys(settings: JwtKeySettings): { ring?: JwtKeyRing; problems: KeyProblem[] } {
  const problems: KeyProblem[] = [];
  const prefix = "Security:Jwt";
  let privateKey: KeyObject | undefined;
  if (!settings.CurrentKeyId) problems.push({ key: `${prefix}:CurrentKeyId`, problem: "is required" });
  if (!settings.PrivateKey) {
    problems.push({
      key: `${prefix}:PrivateKey`,
      problem: "is required (the current key id has no private key)",
    });
  } else {
    try {
      privateKey = createPrivateKey(settings.PrivateKey);
      if (privateKey.asymmetricKeyType !== "rsa") {
        problems.push({ key: `${prefix}:PrivateKey`, problem: "must be an RSA key" });
        privateKey = undefined;
      } else if (rsaBits(privateKey) < MIN_RSA_BITS) {
        problems.push({ key: `${prefix}:PrivateKey`, problem: `must be at least ${MIN_RSA_BITS} bits` });
      }
    } catch {
      problems.push({
        key: `${prefix}:PrivateKey`,
        problem: "is not a readable PEM private key (PKCS#8 or PKCS#1)",
      });
    }
  }
  const verificationKeys = new Map<string, KeyObject>();
  settings.VerificationKeys.forEach((entry, i) => {
    const key = `${prefix}:VerificationKeys:${i}`;
    if (verificationKeys.has(entry.KeyId)) {
      problems.push({ key: `${key}:KeyId`, problem: "is listed twice" });
      return;
    }
    try {
      const publicKey = createPublicKey(entry.PublicKey);
      if (publicKey.asymmetricKeyType !== "rsa")
        problems.push({ key: `${key}:PublicKey`, problem: "must be an RSA key" });
      else verificationKeys.set(entry.KeyId, publicKey);
    } catch {
      problems.push({ key: `${key}:PublicKey`, problem: "is not a readable PEM public key" });
    }
  });
  if (privateKey && settings.CurrentKeyId) {
    const derived = createPublicKey(privateKey);
    const listed = verificationKeys.get(settings.CurrentKeyId);
    if (listed && !listed.equals(derived)) {
      problems.push({
        key: `${prefix}:VerificationKeys`,
        problem: "lists the current key id with a public key that does not match PrivateKey",
      });
    }
    verificationKeys.set(settings.CurrentKeyId, derived);
  }
  if (problems.length > 0 || !privateKey || !settings.CurrentKeyId) return { problems };
  return { ring: { currentKeyId: settings.CurrentKeyId, privateKey, verificationKeys }, problems };
}
