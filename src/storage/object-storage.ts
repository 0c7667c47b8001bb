import { randomUUID } from "node:crypto";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsCommand,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import type { Clock } from "../clock.ts";
import type { AppConfig } from "../config/load.ts";
import { AppError } from "../errors.ts";
import { invalidCursor } from "../pagination.ts";
import { disabledTelemetry, type Telemetry } from "../telemetry/otel.ts";
import { traceS3Client } from "../telemetry/s3-spans.ts";
import {
  grantObjectKey,
  InvalidObjectKeyError,
  relativeObjectKey,
  splitGrantKey,
  tenantObjectKey,
  tenantPrefix,
} from "./object-keys.ts";
import { createS3Client } from "./s3-client.ts";

/** SigV4 presigned URLs live at most 7 days. */
const MAX_PRESIGN_SECONDS = 604_800;
const MIME = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/;

export interface ObjectStorageOptions {
  client: S3Client;
  bucket: string;
  maxUploadBytes: number;
  allowedMimeTypes: string[];
  presignSeconds: number;
  clock: Clock;
}

export interface StoredObject {
  /** Relative to the tenant's prefix. */
  key: string;
  size: number;
  lastModified: Date | null;
}

/** One stored version of a tenant's key: the plain object, or the one an upload grant wrote. */
export interface ObjectVersion {
  /** The full S3 key. */
  objectKey: string;
  grantId: string | null;
  size: number;
  lastModified: Date | null;
}

export interface PresignedUpload {
  key: string;
  method: "PUT";
  url: string;
  /** Headers the upload must carry exactly as given: they are part of the signature. */
  headers: { "content-type": string; "content-length": string };
  expiresAt: Date;
}

export interface PresignedDownload {
  key: string;
  url: string;
  expiresAt: Date;
}

function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

function isNotFound(error: unknown): boolean {
  const name = (error as { name?: string })?.name;
  return statusOf(error) === 404 || name === "NotFound" || name === "NoSuchKey";
}

/**
 * Tenant object storage on S3: keys forced under `tenants/<tenantId>/`, the size limit and the
 * MIME allowlist checked before anything reaches the store, presigned URLs that carry them.
 */
export class ObjectStorage {
  readonly #o: ObjectStorageOptions;
  readonly #allowed: Set<string>;

  constructor(options: ObjectStorageOptions) {
    if (options.presignSeconds > MAX_PRESIGN_SECONDS)
      throw new Error("Storage:PresignSeconds is at most 604800");
    this.#o = options;
    this.#allowed = new Set(options.allowedMimeTypes.map((type) => type.trim().toLowerCase()));
  }

  get maxUploadBytes(): number {
    return this.#o.maxUploadBytes;
  }

  /** The client and bucket, for whole-prefix work (src/storage/prefix-objects.ts). */
  get bucket(): { client: S3Client; bucket: string; clock: Clock } {
    return { client: this.#o.client, bucket: this.#o.bucket, clock: this.#o.clock };
  }

  #key(tenantId: string, key: string): string {
    try {
      return tenantObjectKey(tenantId, key);
    } catch (error) {
      if (error instanceof InvalidObjectKeyError)
        throw new AppError("validation_failed", "The object key is not valid.", {
          fields: [{ path: "key", message: error.message }],
        });
      throw error;
    }
  }

  /** The content type to store and sign; refused (415) unless its `type/subtype` is allowed. */
  #contentType(contentType: string): string {
    const value = contentType.trim();
    const base = value.split(";")[0]?.trim().toLowerCase() ?? "";
    // biome-ignore lint/suspicious/noControlCharactersInRegex: header injection is what is refused
    if (!MIME.test(base) || /[\u0000-\u001f\u007f]/.test(value) || !this.#allowed.has(base))
      throw new AppError("unsupported_media_type", `Content type "${base || "(none)"}" is not allowed.`);
    return value;
  }

  #size(size: number): number {
    if (!Number.isSafeInteger(size) || size < 0)
      throw new AppError("validation_failed", "The size is not valid.", {
        fields: [{ path: "size", message: "must be a whole number of bytes" }],
      });
    if (size > this.#o.maxUploadBytes)
      throw new AppError("payload_too_large", `Uploads are limited to ${this.#o.maxUploadBytes} bytes.`);
    return size;
  }

  /** Server-side upload: checked first, stored only when it passes. */
  async putObject(
    tenantId: string,
    input: { key: string; body: Uint8Array; contentType: string },
  ): Promise<StoredObject> {
    const Key = this.#key(tenantId, input.key);
    const ContentType = this.#contentType(input.contentType);
    const size = this.#size(input.body.byteLength);
    await this.#o.client.send(
      new PutObjectCommand({
        Bucket: this.#o.bucket,
        Key,
        Body: input.body,
        ContentType,
        ContentLength: size,
      }),
    );
    return { key: input.key, size, lastModified: null };
  }

  /**
   * A presigned PUT whose content type and exact length are signed (the store refuses any other),
   * writing the object version of one grant: `<key>~g~<grantId>`, a name no other URL writes.
   */
  async createUpload(
    tenantId: string,
    input: { key: string; contentType: string; size: number; grantId?: string },
  ): Promise<PresignedUpload & { objectKey: string }> {
    const Key = grantObjectKey(this.#key(tenantId, input.key), input.grantId ?? randomUUID());
    const ContentType = this.#contentType(input.contentType);
    const size = this.#size(input.size);
    const now = this.#o.clock.now();
    const url = await getSignedUrl(
      this.#o.client,
      new PutObjectCommand({ Bucket: this.#o.bucket, Key, ContentType, ContentLength: size }),
      {
        expiresIn: this.#o.presignSeconds,
        signingDate: now,
        signableHeaders: new Set(["content-type", "content-length"]),
      },
    );
    return {
      key: input.key,
      objectKey: Key,
      method: "PUT",
      url,
      headers: { "content-type": ContentType, "content-length": String(size) },
      expiresAt: new Date(now.getTime() + this.#o.presignSeconds * 1000),
    };
  }

  /**
   * The stored versions of a tenant's key, newest first: the plain object (a server-side upload,
   * or one from before upload grants) and each grant's. Throws 404 when there is none.
   */
  async versions(tenantId: string, key: string): Promise<ObjectVersion[]> {
    const full = this.#key(tenantId, key);
    const out = await this.#o.client.send(
      new ListObjectsCommand({ Bucket: this.#o.bucket, Prefix: full, MaxKeys: 1000 }),
    );
    const found: ObjectVersion[] = [];
    for (const object of out.Contents ?? []) {
      if (!object.Key) continue;
      const split = splitGrantKey(object.Key);
      if (split.key !== full || (object.Key !== full && !split.grantId)) continue;
      found.push({
        objectKey: object.Key,
        grantId: split.grantId,
        size: object.Size ?? 0,
        lastModified: object.LastModified ?? null,
      });
    }
    if (found.length === 0) throw new AppError("not_found", "No such object.");
    return found.sort((a, b) => (b.lastModified?.getTime() ?? 0) - (a.lastModified?.getTime() ?? 0));
  }

  async #head(Key: string): Promise<{ Key: string; size: number; contentType?: string; version: string }> {
    try {
      const head = await this.#o.client.send(new HeadObjectCommand({ Bucket: this.#o.bucket, Key }));
      // what tells one stored version of the key from the next (the same bytes uploaded again
      // have the same ETag but a new modification time)
      const version = `${head.VersionId ?? ""}|${head.ETag ?? ""}|${head.LastModified?.getTime() ?? ""}`;
      return { Key, size: head.ContentLength ?? 0, contentType: head.ContentType, version };
    } catch (error) {
      if (isNotFound(error)) throw new AppError("not_found", "No such object.");
      throw error;
    }
  }

  /** A presigned GET for an object of this tenant (404 when the tenant has no such object). */
  async createDownload(tenantId: string, key: string): Promise<PresignedDownload> {
    const [newest] = await this.versions(tenantId, key);
    const { Key } = await this.#head(newest?.objectKey ?? this.#key(tenantId, key));
    const now = this.#o.clock.now();
    const filename = (key.split("/").at(-1) ?? "download").replace(/["\\\r\n]/g, "_");
    const url = await getSignedUrl(
      this.#o.client,
      new GetObjectCommand({
        Bucket: this.#o.bucket,
        Key,
        // served as an attachment: an uploaded HTML or SVG file never renders on the store's origin
        ResponseContentDisposition: `attachment; filename="${filename}"`,
      }),
      { expiresIn: this.#o.presignSeconds, signingDate: now },
    );
    return { key, url, expiresAt: new Date(now.getTime() + this.#o.presignSeconds * 1000) };
  }

  /** Reads an object of this tenant (server-side use). */
  async getObject(
    tenantId: string,
    key: string,
  ): Promise<{ body: Uint8Array; contentType: string | undefined }> {
    const [newest] = await this.versions(tenantId, key);
    const Key = newest?.objectKey ?? this.#key(tenantId, key);
    try {
      const out = await this.#o.client.send(new GetObjectCommand({ Bucket: this.#o.bucket, Key }));
      return {
        body: (await out.Body?.transformToByteArray()) ?? new Uint8Array(),
        contentType: out.ContentType,
      };
    } catch (error) {
      if (isNotFound(error)) throw new AppError("not_found", "No such object.");
      throw error;
    }
  }

  /**
   * One page of the tenant's objects, keys relative to its prefix, after the stored key `after`;
   * `last` is the page's last stored key when there are more (the next page's `after`).
   */
  async listObjects(
    tenantId: string,
    input: { prefix?: string; after?: string; limit: number },
  ): Promise<{ items: StoredObject[]; last: string | null }> {
    let prefix: string;
    try {
      prefix = tenantPrefix(tenantId);
    } catch (error) {
      if (error instanceof InvalidObjectKeyError) throw new AppError("forbidden", "No tenant to list.");
      throw error;
    }
    if (input.prefix) {
      // a listing prefix may end in "/" (a folder); validate it as a key without that slash
      const trimmed = input.prefix.replace(/\/$/, "");
      prefix = `${this.#key(tenantId, trimmed)}${input.prefix.endsWith("/") ? "/" : ""}`;
    }
    const out = await this.#o.client.send(
      // ListObjects (v1) with a marker: every S3-compatible store has it, and the cursor is just the
      // last key of the previous page relative to the tenant, meaningless outside its prefix
      new ListObjectsCommand({
        Bucket: this.#o.bucket,
        Prefix: prefix,
        MaxKeys: input.limit,
        ...(input.after ? { Marker: this.#cursorKey(tenantId, input.after) } : {}),
      }),
    );
    // one item per tenant key: the newest of its versions on this page (the cursor is the last
    // stored key seen, version mark included)
    const items = new Map<string, StoredObject>();
    let last: string | null = null;
    for (const object of out.Contents ?? []) {
      const stored = object.Key ? relativeObjectKey(tenantId, object.Key) : null;
      if (stored === null) continue; // never show anything outside the tenant's prefix
      last = stored;
      const { key } = splitGrantKey(stored);
      const item = { key, size: object.Size ?? 0, lastModified: object.LastModified ?? null };
      const seen = items.get(key);
      if (!seen || (item.lastModified?.getTime() ?? 0) >= (seen.lastModified?.getTime() ?? 0))
        items.set(key, item);
    }
    return { items: [...items.values()], last: out.IsTruncated ? last : null };
  }

  /** A listing cursor (a stored key relative to the tenant, version mark allowed) as a full key. */
  #cursorKey(tenantId: string, cursor: string): string {
    const { key, grantId } = splitGrantKey(cursor);
    let full: string;
    try {
      full = tenantObjectKey(tenantId, key);
    } catch (error) {
      if (error instanceof InvalidObjectKeyError) throw invalidCursor();
      throw error;
    }
    return grantId ? grantObjectKey(full, grantId) : full;
  }

  /**
   * Deletes every stored version of a tenant's key (404 when there is none); resolves to each
   * version deleted, its size and S3 version, so deletes racing on one object can be counted once.
   */
  async deleteObject(tenantId: string, key: string): Promise<Array<ObjectVersion & { version: string }>> {
    const deleted: Array<ObjectVersion & { version: string }> = [];
    for (const found of await this.versions(tenantId, key)) {
      let head: { size: number; version: string };
      try {
        head = await this.#head(found.objectKey);
      } catch (error) {
        if (error instanceof AppError && error.code === "not_found") continue; // deleted meanwhile
        throw error;
      }
      await this.deleteStored(found.objectKey);
      deleted.push({ ...found, size: head.size, version: head.version });
    }
    return deleted;
  }

  /** Whether an object is stored under this full key. */
  async isStored(objectKey: string): Promise<boolean> {
    try {
      await this.#head(objectKey);
      return true;
    } catch (error) {
      if (error instanceof AppError && error.code === "not_found") return false;
      throw error;
    }
  }

  /** Deletes one stored object by its full key (no error when it is absent). */
  async deleteStored(objectKey: string): Promise<void> {
    await this.#o.client.send(new DeleteObjectCommand({ Bucket: this.#o.bucket, Key: objectKey }));
  }
}

/** Object storage from `Storage` / `Storage:S3`; null when no bucket is configured (storage is off). */
export function createObjectStorage(
  config: AppConfig,
  deps: { clock: Clock; client?: S3Client; telemetry?: Telemetry },
): ObjectStorage | null {
  const storage = config.settings.Storage;
  if (!storage.S3.Bucket) return null;
  return new ObjectStorage({
    client: deps.client ?? traceS3Client(createS3Client(storage.S3), deps.telemetry ?? disabledTelemetry()),
    bucket: storage.S3.Bucket,
    maxUploadBytes: storage.MaxUploadBytes,
    allowedMimeTypes: storage.AllowedMimeTypes,
    presignSeconds: storage.PresignSeconds,
    clock: deps.clock,
  });
}
