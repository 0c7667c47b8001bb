/**
 * Provider secrets in an export, sealed to a passphrase given at export time (docs/tenant-lifecycle.md):
 * an archive key derived with scrypt from the passphrase and a random salt (the salt and the
 * parameters are in the manifest, the passphrase nowhere), each value AES-256-GCM under it, bound to
 * its tenant and name. The archive alone reveals nothing; the passphrase opens it at import.
 */
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from "node:crypto";

export const ARCHIVE_KDF = { name: "scrypt", N: 32_768, r: 8, p: 1, keyBytes: 32 } as const;
export const ARCHIVE_KEY_ID = "export-passphrase";

export function newArchiveSalt(): string {
  return randomBytes(16).toString("base64");
}

export function deriveArchiveKey(passphrase: string, saltBase64: string): Buffer {
  const { N, r, p, keyBytes } = ARCHIVE_KDF;
  return scryptSync(passphrase, Buffer.from(saltBase64, "base64"), keyBytes, {
    N,
    r,
    p,
    maxmem: 64 * 1024 * 1024,
  });
}

const aad = (tenantId: string, name: string) =>
  Buffer.from(`plinth/tenant-export/v1\u0000${tenantId}\u0000${name}`);

export function sealForArchive(key: Buffer, tenantId: string, name: string, value: string) {
  const nonce = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: 16 });
  cipher.setAAD(aad(tenantId, name));
  const body = Buffer.concat([cipher.update(value, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { keyId: ARCHIVE_KEY_ID, nonce: nonce.toString("base64"), ciphertext: body.toString("base64") };
}

/** Opens a value sealed for the archive; throws when the passphrase is wrong or anything was altered. */
export function openFromArchive(
  key: Buffer,
  tenantId: string,
  name: string,
  sealed: { nonce: string; ciphertext: string },
): string {
  const body = Buffer.from(sealed.ciphertext, "base64");
  const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(sealed.nonce, "base64"), {
    authTagLength: 16,
  });
  decipher.setAAD(aad(tenantId, name));
  decipher.setAuthTag(body.subarray(body.length - 16));
  return Buffer.concat([decipher.update(body.subarray(0, body.length - 16)), decipher.final()]).toString(
    "utf8",
  );
}
