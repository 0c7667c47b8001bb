import { afterAll, beforeAll, expect, test } from "bun:test";
import { context, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { ManualClock } from "../../src/clock.ts";
import { ObjectStorage } from "../../src/storage/object-storage.ts";
import { createS3Client } from "../../src/storage/s3-client.ts";
import { traceS3Client } from "../../src/telemetry/s3-spans.ts";
import { createTelemetry } from "../../src/telemetry/sdk.ts";
import { S3_CREDENTIALS, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";

const clock = new ManualClock("2026-11-01T12:00:00Z");
let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3(clock);
});
afterAll(() => s3.close());

test("each S3 operation is a client span in the caller's trace, with traceparent on the request", async () => {
  const exporter = new InMemorySpanExporter();
  const telemetry = createTelemetry({
    serviceName: "plinth",
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  const client = traceS3Client(
    createS3Client({
      Bucket: s3.bucket,
      Region: "us-east-1",
      Endpoint: s3.endpoint,
      ForcePathStyle: true,
      AccessKeyId: S3_CREDENTIALS.accessKeyId,
      SecretAccessKey: S3_CREDENTIALS.secretAccessKey,
    }),
    telemetry,
  );
  const sent: string[] = [];
  // what leaves the client, after signing
  client.middlewareStack.add(
    (next) => async (args) => {
      const headers = (args.request as { headers?: Record<string, string> }).headers ?? {};
      sent.push(headers.traceparent ?? "");
      return next(args);
    },
    { step: "finalizeRequest", priority: "low", name: "testCapture" },
  );
  const storage = new ObjectStorage({
    client,
    bucket: s3.bucket,
    maxUploadBytes: 1024,
    allowedMimeTypes: ["text/plain"],
    presignSeconds: 300,
    clock,
  });
  const tenant = crypto.randomUUID();
  const key = `secret-name-${crypto.randomUUID()}.txt`;
  await telemetry.inSpan("request", {}, async () => {
    await storage.putObject(tenant, { key, body: new TextEncoder().encode("hi"), contentType: "text/plain" });
  });
  const spans = exporter.getFinishedSpans();
  const parent = spans.find((s) => s.name === "request");
  const put = spans.find((s) => s.name === "S3 PutObject");
  expect(put).toBeDefined();
  expect(put?.spanContext().traceId).toBe(parent?.spanContext().traceId);
  expect(put?.parentSpanContext?.spanId).toBe(parent?.spanContext().spanId);
  expect(put?.attributes["rpc.method"]).toBe("PutObject");
  expect(put?.attributes["http.response.status_code"]).toBe(200);
  expect(sent.at(-1)).toBe(`00-${put?.spanContext().traceId}-${put?.spanContext().spanId}-01`);
  // the object key and tenant are not on the span
  expect(JSON.stringify(put?.attributes)).not.toContain(key);
  expect(JSON.stringify(put?.attributes)).not.toContain(tenant);
  expect(trace.getSpan(context.active())).toBeUndefined();
  await telemetry.shutdown();
});
