import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import type { Settings } from "../config/schema.ts";
import { createS3Client } from "./s3-client.ts";

/** Where signed checkpoints are kept: one object each, newest first in key order. */
export interface CheckpointStore {
  /** Writes one checkpoint made at `at`; under Object Lock until `retainUntil` when given. */
  put(at: Date, body: string, retainUntil?: Date): Promise<string>;
  /** The newest checkpoint's key and text, or null when there is none. */
  latest(): Promise<{ key: string; body: string } | null>;
}

/** Larger than any millisecond time Plinth will see: keys count down, so the newest lists first. */
const FAR_FUTURE_MS = 9_999_999_999_999;

/** `<prefix><13 digits counting down>-<ISO time>.json`: the first key a LIST returns is the newest. */
export const checkpointKey = (prefix: string, at: Date): string =>
  `${prefix}${String(FAR_FUTURE_MS - at.getTime()).padStart(13, "0")}-${at.toISOString()}.json`;

/**
 * Checkpoints in an S3 bucket. With `retainUntil` the object is written in Object Lock compliance
 * mode (nobody, the bucket's owner included, can delete or overwrite it before then), with the
 * checksum S3 requires of such a write; the bucket must have Object Lock enabled, or S3 refuses the
 * write. An S3-compatible store without Object Lock (s3rver in the tests) ignores the headers.
 */
export function s3CheckpointStore(client: S3Client, bucket: string, prefix: string): CheckpointStore {
  return {
    async put(at, body, retainUntil) {
      const Key = checkpointKey(prefix, at);
      await client.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key,
          Body: Buffer.from(body),
          ContentType: "application/json",
          ...(retainUntil
            ? {
                ObjectLockMode: "COMPLIANCE",
                ObjectLockRetainUntilDate: retainUntil,
                ChecksumAlgorithm: "SHA256",
              }
            : {}),
        }),
      );
      return Key;
    },
    async latest() {
      // the first key in key order is the newest; no MaxKeys=1: s3rver (the tests\' store) answers a 500
      // to any truncated listing, and one page of keys is cheap
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
      // S3 lists in key order; the smallest key is the newest whatever order a store lists in
      const key = (listed.Contents ?? []).map((o) => o.Key ?? "").sort()[0];
      if (!key) return null;
      const object = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return { key, body: (await object.Body?.transformToString("utf8")) ?? "" };
    },
  };
}

/**
 * The checkpoint store of the configuration (docs/audit.md): `Audit:Checkpoints:Bucket`, else
 * `Storage:S3:Bucket`, through `Storage:S3`'s endpoint and credentials; null without a bucket.
 */
export function checkpointStoreOf(settings: Settings): CheckpointStore | null {
  const { Checkpoints } = settings.Audit;
  const bucket = Checkpoints.Bucket ?? settings.Storage.S3.Bucket;
  if (!bucket) return null;
  return s3CheckpointStore(createS3Client(settings.Storage.S3), bucket, Checkpoints.Prefix);
}
