import { createHash, createHmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";

/** node:crypto in the shape the SDK signer expects (`ChecksumConstructor`). */
export class Sha256 {
  readonly #hash;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#hash = secret
      ? createHmac("sha256", typeof secret === "string" ? secret : Buffer.from(secret as ArrayBuffer))
      : createHash("sha256");
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#hash.update(typeof data === "string" ? data : Buffer.from(data as ArrayBuffer));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
  reset(): void {}
}

export interface PresignedCheck {
  method: string;
  url: string;
  /** Headers the client actually sends (lower-case names). */
  headers: Record<string, string>;
  now: Date;
  credentials: { accessKeyId: string; secretAccessKey: string };
}

export type PresignedVerdict =
  | { ok: true; signedHeaders: string[]; expiresAt: Date }
  | {
      ok: false;
      reason: "not presigned" | "not yet valid" | "expired" | "signature mismatch" | "unknown key";
    };

const PRESIGN_PARAMS = [
  "X-Amz-Algorithm",
  "X-Amz-Credential",
  "X-Amz-Date",
  "X-Amz-Expires",
  "X-Amz-SignedHeaders",
  "X-Amz-Signature",
  "X-Amz-Content-Sha256",
];

function parseAmzDate(value: string): Date {
  const m = value.match(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/);
  if (!m) return new Date(Number.NaN);
  return new Date(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`);
}

/**
 * Verifies a presigned S3 request the way S3 does (s3rver does not): expiry, and the signature
 * recomputed with the SDK's own SigV4 signer over the method, path, query and the signed headers
 * as the client sends them.
 */
export async function verifyPresigned(check: PresignedCheck): Promise<PresignedVerdict> {
  const url = new URL(check.url);
  const q = url.searchParams;
  const signature = q.get("X-Amz-Signature");
  const credential = q.get("X-Amz-Credential");
  const date = q.get("X-Amz-Date");
  const expires = Number(q.get("X-Amz-Expires"));
  const signedHeaders = q.get("X-Amz-SignedHeaders")?.split(";") ?? [];
  if (!signature || !credential || !date || !Number.isFinite(expires))
    return { ok: false, reason: "not presigned" };
  const [accessKeyId, , region, service] = credential.split("/");
  if (accessKeyId !== check.credentials.accessKeyId) return { ok: false, reason: "unknown key" };
  const signedAt = parseAmzDate(date);
  const expiresAt = new Date(signedAt.getTime() + expires * 1000);
  if (check.now < signedAt) return { ok: false, reason: "not yet valid" };
  if (check.now >= expiresAt) return { ok: false, reason: "expired" };

  const query: Record<string, string> = {};
  for (const [name, value] of q) if (!PRESIGN_PARAMS.includes(name)) query[name] = value;
  const headers: Record<string, string> = { host: url.host };
  for (const name of signedHeaders) if (name !== "host") headers[name] = check.headers[name] ?? "";
  // the presigner signs UNSIGNED-PAYLOAD through this header (then moves it into the query)
  headers["X-Amz-Content-Sha256"] = q.get("X-Amz-Content-Sha256") ?? "UNSIGNED-PAYLOAD";
  const signer = new SignatureV4({
    credentials: check.credentials,
    region: region ?? "us-east-1",
    service: service ?? "s3",
    sha256: Sha256,
    uriEscapePath: false,
  });
  const presigned = await signer.presign(
    {
      method: check.method.toUpperCase(),
      protocol: url.protocol,
      hostname: url.hostname,
      port: url.port ? Number(url.port) : undefined,
      path: url.pathname,
      query,
      headers,
    },
    { signingDate: signedAt, expiresIn: expires, signableHeaders: new Set(signedHeaders) },
  );
  const expected = presigned.query?.["X-Amz-Signature"];
  return expected === signature
    ? { ok: true, signedHeaders, expiresAt }
    : { ok: false, reason: "signature mismatch" };
}
