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

function derOf(node: forge.asn1.Asn1): Buffer {
  return Buffer.from(forge.asn1.toDer(node).getBytes(), "binary");
}

/** A key bag's private key; forge decodes RSA only, so any other type comes from the bag's PKCS#8 DER. */
function bagKey(bag: forge.pkcs12.Bag): KeyObject | undefined {
  try {
    if (bag.key) return createPrivateKey(forge.pki.privateKeyToPem(bag.key));
    return createPrivateKey({ key: derOf(bag.asn1), format: "der", type: "pkcs8" });
  } catch {
    return undefined;
  }
}

/** A cert bag's certificate; forge decodes RSA only, so any other type comes from the bag's DER. */
function bagCertificate(bag: forge.pkcs12.Bag): X509Certificate | undefined {
  try {
    return new X509Certificate(bag.cert ? forge.pki.certificateToPem(bag.cert) : derOf(bag.asn1));
  } catch {
    return undefined;
  }
}

/**
 * The first private key that one of the certificates belongs to, with that certificate: a chain
 * file may list its CA certificates (and in any order) beside the one the key belongs to.
 */
function matchingPair(keys: KeyObject[], certificates: X509Certificate[]): LoadedCertificate {
  if (keys.length === 0 || certificates.length === 0)
    throw new CertificateError("holds no certificate with a private key");
  for (const privateKey of keys) {
    const certificate = certificates.find((candidate) => candidate.checkPrivateKey(privateKey));
    if (certificate) return { certificate, privateKey, publicKey: createPublicKey(privateKey) };
  }
  throw new CertificateError("private key matches no certificate in the file");
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
  const keys = [...bagsOf(oids.pkcs8ShroudedKeyBag), ...bagsOf(oids.keyBag)]
    .map(bagKey)
    .filter((key): key is KeyObject => key !== undefined);
  const certificates = bagsOf(oids.certBag)
    .map(bagCertificate)
    .filter((certificate): certificate is X509Certificate => certificate !== undefined);
  return matchingPair(keys, certificates);
}

function fromPem(text: string, password: string | undefined): LoadedCertificate {
  const certificates: X509Certificate[] = [];
  for (const block of text.match(/-{5}BEGIN CERTIFICATE-{5}[\s\S]+?-{5}END CERTIFICATE-{5}/g) ?? []) {
    try {
      certificates.push(new X509Certificate(block));
    } catch {
      // an unreadable block is skipped; no readable one at all is refused below
    }
  }
  if (certificates.length === 0) throw new CertificateError("holds no readable X.509 certificate");
  const keyPem = text.match(
    /-----BEGIN (?:ENCRYPTED |RSA |EC )?PRIVATE KEY-----[\s\S]+?-----END (?:ENCRYPTED |RSA |EC )?PRIVATE KEY-----/,
  );
  if (!keyPem) throw new CertificateError("holds no private key");
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: keyPem[0], passphrase: password || undefined });
  } catch {
    throw new CertificateError("private key cannot be opened with the configured password");
  }
  return matchingPair([privateKey], certificates);
}

/** Data protection wraps its keys with RSA-OAEP: a certificate with any other key type cannot be used. */
function requireRsa(loaded: LoadedCertificate): LoadedCertificate {
  const type = loaded.privateKey.asymmetricKeyType ?? "unknown";
  if (type !== "rsa")
    throw new CertificateError(
      `must hold an RSA key (data protection wraps keys with RSA-OAEP), not ${type}`,
    );
  return loaded;
}

/**
 * Reads an X.509 certificate with its private key: PKCS#12 (.pfx/.p12) or PEM (cert + key, key
 * optionally encrypted). The file may carry a chain: the certificate used is the one whose public
 * key matches the private key. The key must be RSA.
 */
export function loadCertificate(path: string, password: string | undefined): LoadedCertificate {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch {
    throw new CertificateError(`file cannot be read: ${path}`);
  }
  const text = bytes.toString("utf8");
  if (text.includes("-----BEGIN")) return requireRsa(fromPem(text, password));
  return requireRsa(fromPkcs12(bytes, password ?? ""));
}
