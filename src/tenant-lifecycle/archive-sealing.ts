/**
 * Provider secrets in an export, sealed to a passphrase given at export time (docs/tenant-lifecycle.md):
 * an archive key derived with scrypt from the passphrase and a random salt (the salt and the
 * parameters are in the manifest, the passphrase nowhere), each value AES-256-GCM under it, bound to
 * its tenant and name. The archive alone reveals nothing; the passphrase opens it at import.
 */
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from "node:crypto";
import { sealedFor } from "../auth/totp-factor.ts";

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

/** Where a table keeps a sealed value, and what the value is bound to (its tenant, or its user). */
export interface SealedColumns {
  keyId: string;
  nonce: string;
  ciphertext: string;
  binding: (row: Record<string, unknown>, tenantId: string) => string;
  name: (row: Record<string, unknown>) => string;
}

/**
 * The tables whose rows hold a value sealed under the tenant's data key: an export carries them
 * only sealed again to the passphrase's key (left out without one), an import seals them under the
 * target's new data key. `tenant_data_keys` itself never leaves the installation.
 */
export const SEALED_TABLES: Record<string, SealedColumns> = {
  tenant_secrets: {
    keyId: "key_id",
    nonce: "nonce",
    ciphertext: "ciphertext",
    binding: (_row, tenantId) => tenantId,
    name: (row) => String(row.name),
  },
  totp_factors: {
    keyId: "secret_key_id",
    nonce: "secret_nonce",
    ciphertext: "secret_ciphertext",
    binding: (row) => sealedFor(String(row.user_id)).binding,
    name: (row) => sealedFor(String(row.user_id)).name,
  },
};

/** The name a sealed value is bound to in the archive (a tenant secret's own name, as archives before TOTP had it). */
export const archiveName = (table: string, binding: string, name: string, tenantId: string): string =>
  binding === tenantId && table === "tenant_secrets" ? name : `${table}/${binding}/${name}`;

/** The sealed value of `row` (a table of SEALED_TABLES) and how it is bound. */
export function sealedValueOf(columns: SealedColumns, row: Record<string, unknown>, tenantId: string) {
  return {
    binding: columns.binding(row, tenantId),
    name: columns.name(row),
    sealed: {
      keyId: String(row[columns.keyId]),
      nonce: String(row[columns.nonce]),
      ciphertext: String(row[columns.ciphertext]),
    },
  };
}

/** `row` with its sealed value replaced. */
export function withSealed(
  columns: SealedColumns,
  row: Record<string, unknown>,
  sealed: { keyId: string; nonce: string; ciphertext: string },
): Record<string, unknown> {
  return {
    ...row,
    [columns.keyId]: sealed.keyId,
    [columns.nonce]: sealed.nonce,
    [columns.ciphertext]: sealed.ciphertext,
  };
}
