import { generateKeyPairSync, randomBytes } from "node:crypto";
import forge from "node-forge";

/**
 * A self-signed data-protection certificate (RSA 3072, 10 years) with its private key, as PKCS#12
 * under `password`: what `keys:generate` writes as data-protection.pfx, and each rotation's next one.
 */
export function dataProtectionCertificate(commonName: string, password: string, now: Date): Buffer {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 3072 });
  const key = forge.pki.privateKeyFromPem(privateKey.export({ type: "pkcs1", format: "pem" }).toString());
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.setRsaPublicKey(key.n, key.e);
  cert.serialNumber = `01${randomBytes(15).toString("hex")}`;
  cert.validity.notBefore = now;
  cert.validity.notAfter = new Date(now.getTime() + 10 * 365 * 86_400_000);
  const subject = [{ name: "commonName", value: commonName }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.sign(key, forge.md.sha256.create());
  const p12 = forge.pkcs12.toPkcs12Asn1(key, [cert], password, { algorithm: "aes256" });
  return Buffer.from(forge.asn1.toDer(p12).getBytes(), "binary");
}
