import { S3Client } from "@aws-sdk/client-s3";
import type { Settings } from "../config/schema.ts";

export type S3Settings = Settings["Storage"]["S3"];

/**
 * An S3 client for any S3-compatible endpoint. Credentials: `Storage:S3:AccessKeyId` and
 * `SecretAccessKey` when both are set; otherwise the AWS SDK's default provider chain (`AWS_*`
 * variables, shared profiles, container and instance roles), read by the SDK itself. Checksums
 * only when an operation requires them: many S3-compatible stores reject the newer defaults, and
 * presigned URLs stay free of checksum parameters a browser could not send.
 */
export function createS3Client(settings: S3Settings): S3Client {
  const credentials =
    settings.AccessKeyId && settings.SecretAccessKey
      ? { accessKeyId: settings.AccessKeyId, secretAccessKey: settings.SecretAccessKey }
      : undefined;
  return new S3Client({
    ...(settings.Region ? { region: settings.Region } : {}),
    ...(settings.Endpoint ? { endpoint: settings.Endpoint } : {}),
    forcePathStyle: settings.ForcePathStyle,
    ...(credentials ? { credentials } : {}),
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
}
