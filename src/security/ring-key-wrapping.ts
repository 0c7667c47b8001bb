import { constants, privateDecrypt, publicEncrypt } from "node:crypto";
import type { LoadedCertificate } from "./certificates.ts";

/** A data-protection ring key wrapped with the certificate's RSA public key (RSA-OAEP-SHA256), as Base64. */
export function wrapRingKey(certificate: LoadedCertificate, key: Buffer): string {
  return publicEncrypt(
    { key: certificate.publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" },
    key,
  ).toString("base64");
}

/** The ring key `wrapped` (Base64) holds, or null when the certificate's private key does not open it. */
export function unwrapRingKey(certificate: LoadedCertificate, wrapped: string): Buffer | null {
  try {
    return privateDecrypt(
      { key: certificate.privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" },
      Buffer.from(wrapped, "base64"),
    );
  } catch {
    return null;
  }
}
