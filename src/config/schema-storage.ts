import { z } from "zod";
import { flag, int, secret } from "./schema-fields.ts";

/** `Storage`: the S3-compatible object storage of tenants' files (docs/configuration.md). */
export const storageSection = z.object({
  Provider: z
    .enum(["S3"])
    .default("S3")
    .meta({ description: "Object store implementation; its settings are under `Storage:<Provider>`." }),
  MaxUploadBytes: int(
    1,
    10_485_760,
    "Largest object a tenant may upload, in bytes (`STORAGE_MAX_UPLOAD_BYTES`).",
  ),
  AllowedMimeTypes: z
    .array(z.string().min(1))
    .default([
      "image/png",
      "image/jpeg",
      "image/gif",
      "image/webp",
      "application/pdf",
      "text/plain",
      "text/csv",
    ])
    .meta({ description: "Content types tenants may upload (exact `type/subtype`, lower case)." }),
  PresignSeconds: z
    .number()
    .int()
    .min(1)
    .max(604_800)
    .default(900)
    .meta({ description: "Lifetime of presigned upload and download URLs, in seconds (at most 7 days)." }),
  S3: z.object({
    Bucket: z
      .string()
      .min(1)
      .optional()
      .meta({ description: "Bucket holding every tenant's objects (`STORAGE_BUCKET`)." }),
    Region: z
      .string()
      .min(1)
      .optional()
      .meta({ description: "Signing region (`STORAGE_REGION`); unset, the AWS SDK reads `AWS_REGION`." }),
    Endpoint: z
      .url()
      .optional()
      .meta({ description: "S3-compatible endpoint URL (`STORAGE_ENDPOINT`); unset, AWS S3." }),
    ForcePathStyle: flag(
      false,
      "Path-style bucket addressing, as most S3-compatible stores need (`STORAGE_FORCE_PATH_STYLE`).",
    ),
    AccessKeyId: z.string().min(1).optional().meta({
      description:
        "Access key id (`STORAGE_ACCESS_KEY_ID`); unset, the AWS SDK's default chain (`AWS_*`, profiles, instance roles).",
    }),
    SecretAccessKey: z
      .string()
      .min(1)
      .optional()
      .meta(secret("Secret access key (`STORAGE_SECRET_ACCESS_KEY`), with AccessKeyId.")),
  }),
});

/** `Audit:Checkpoints`: signed chain heads kept in object storage (docs/audit.md). */
export const auditCheckpointsSection = z.object({
  SigningKey: z
    .string()
    .min(1)
    .optional()
    .meta(
      secret(
        "Ed25519 private key (PEM, PKCS#8) that signs audit checkpoints (`bun run keys:generate` writes one); checkpoints are off without it.",
      ),
    ),
  VerifyKey: z.string().min(1).optional().meta({
    description:
      "Ed25519 public key (PEM) that `audit:verify` checks checkpoints with; unset, the signing key's public half.",
  }),
  KeyId: z
    .string()
    .min(1)
    .default("audit-checkpoint")
    .meta({ description: "Names the signing key in each checkpoint." }),
  Bucket: z.string().min(1).optional().meta({
    description:
      "Bucket the checkpoints are written to (through `Storage:S3`'s endpoint and credentials); unset, `Storage:S3:Bucket`.",
  }),
  Prefix: z
    .string()
    .default("audit-checkpoints/")
    .meta({ description: "Key prefix of the checkpoint objects." }),
  RetentionDays: int(
    0,
    0,
    "S3 Object Lock (compliance mode) on each checkpoint for this many days; 0 sends no Object Lock (the bucket must have Object Lock enabled for more).",
  ),
  Cron: z.string().default("*/15 * * * *").meta({
    description: "When the API processes write a checkpoint (UTC cron; only with a SigningKey).",
  }),
});
