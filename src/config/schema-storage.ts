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
