import { createPrivateKey, createPublicKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import forge from "node-forge";

export interface LoadedCertificate {
  certificate: X509Certificate;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export class CertificateError extends Error {
  override name = "CertificateError";
}

function fromPkcs12(bytes: Buffer, password: string): LoadedCertificate {
  let p12: forge.pkcs12.Pkcs12Pfx;
  try {
    const asn1 = forge.asn1.fromDer(forge.util.createBuffer(bytes.toString("binary")));
    p12 = forge.pkcs12.pkcs12FromAsn1(asn1, false, password);
  } catch {
    throw new CertificateError("cannot be opened with the configured password");
  }
  const oids = forge.pki.oids as Record<string, string>;
  const bagsOf = (type: string | undefined) => (type ? (p12.getBags({ bagType: type })[type] ?? []) : []);
  const keyBags = [...bagsOf(oids.pkcs8ShroudedKeyBag), ...bagsOf(oids.keyBag)];
  const certBags = bagsOf(oids.certBag);
  const key = keyBags.find((bag) => bag.key)?.key;
  const cert = certBags.find((bag) => bag.cert)?.cert;
  if (!key || !cert) throw new CertificateError("holds no certificate with a private key");
  const privateKey = createPrivateKey(forge.pki.privateKeyToPem(key));
  const certificate = new X509Certificate(forge.pki.certificateToPem(cert));
  return { certificate, privateKey, publicKey: certificate.publicKey };
}

function fromPem(text: string, password: string | undefined): LoadedCertificate {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(text);
  } catch {
    throw new CertificateError("holds no readable X.509 certificate");
  }
  const keyPem = text.match(
    /-----BEGIN (?:ENCRYPTED |RSA )?PRIVATE KEY-----[\s\S]+?-----END (?:ENCRYPTED |RSA )?PRIVATE KEY-----/,
  );
  if (!keyPem) throw new CertificateError("holds no private key");
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: keyPem[0], passphrase: password || undefined });
  } catch {
    throw new CertificateError("private key cannot be opened with the configured password");
  }
  const publicKey = createPublicKey(privateKey);
  if (!certificate.checkPrivateKey(privateKey))
    throw new CertificateError("private key does not match the certificate");
  return { certificate, privateKey, publicKey };
}

/** Reads an X.509 certificate with its private key: PKCS#12 (.pfx/.p12) or PEM (cert + key, key optionally encrypted). */
export function loadCertificate(path: string, password: string | undefined): LoadedCertificate {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch {
    throw new CertificateError("file cannot be read");
  }
  const text = bytes.toString("utf8");
  if (text.includes("-----BEGIN")) return fromPem(text, password);
  return fromPkcs12(bytes, password ?? "");
}
