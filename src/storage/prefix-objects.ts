/**
 * Whole prefixes of the bucket, for a tenant's export and deletion (docs/tenant-lifecycle.md):
 * listed a page at a time, read and written as streams (bounded memory), deleted in batches.
 */
import { createReadStream } from "node:fs";
import type { Readable } from "node:stream";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import type { ObjectStorage } from "./object-storage.ts";

export interface PrefixObject {
  key: string;
  size: number;
}

/** Every object under `prefix`, a page (at most 1,000) at a time. */
export async function* listPrefix(storage: ObjectStorage, prefix: string): AsyncGenerator<PrefixObject[]> {
  const { client, bucket } = storage.bucket;
  let token: string | undefined;
  do {
    const out = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: 1000 }),
    );
    const page = (out.Contents ?? []).flatMap((o) => (o.Key ? [{ key: o.Key, size: o.Size ?? 0 }] : []));
    if (page.length > 0) yield page;
    token = out.IsTruncated ? out.NextContinuationToken : undefined;
  } while (token);
}

/** One stored object as a stream, with its content type. */
export async function readStored(
  storage: ObjectStorage,
  key: string,
): Promise<{ body: Readable; contentType: string | undefined }> {
  const { client, bucket } = storage.bucket;
  const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return { body: out.Body as Readable, contentType: out.ContentType };
}

/** Stores a local file under `key`, streamed. */
export async function putFile(
  storage: ObjectStorage,
  key: string,
  input: { path: string; size: number; contentType: string },
): Promise<void> {
  const { client, bucket } = storage.bucket;
  await client.send(
    new PutObjectCommand({
      Bucket: bucket,
      Key: key,
      Body: createReadStream(input.path),
      ContentLength: input.size,
      ContentType: input.contentType,
    }),
  );
}

/** Deletes the given keys, ten at a time (DeleteObject: every S3-compatible store has it). */
export async function deleteKeys(storage: ObjectStorage, keys: string[]): Promise<number> {
  const { client, bucket } = storage.bucket;
  for (let i = 0; i < keys.length; i += 10)
    await Promise.all(
      keys.slice(i, i + 10).map((Key) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key }))),
    );
  return keys.length;
}

/** A presigned GET of `key` that expires after `seconds`. */
export async function presignStored(
  storage: ObjectStorage,
  key: string,
  seconds: number,
): Promise<{ url: string; expiresAt: Date }> {
  const { client, bucket, clock } = storage.bucket;
  const now = clock.now();
  const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: bucket, Key: key }), {
    expiresIn: seconds,
    signingDate: now,
  });
  return { url, expiresAt: new Date(now.getTime() + seconds * 1000) };
}
