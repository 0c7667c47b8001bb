import type { S3Client } from "@aws-sdk/client-s3";
import { context, SpanKind, trace } from "@opentelemetry/api";
import { failSpan, type Telemetry } from "./otel.ts";

interface HttpRequestLike {
  method?: string;
  hostname?: string;
  headers?: Record<string, string>;
}

/**
 * A CLIENT span per S3 operation (`S3 PutObject`: command, bucket host, status; never the key or a
 * header) with `traceparent` on the request. Added at the build step, before signing and retries,
 * so one span covers the operation.
 */
export function traceS3Client(client: S3Client, telemetry: Telemetry): S3Client {
  if (!telemetry.enabled) return client;
  const { tracer } = telemetry;
  client.middlewareStack.add(
    (next, handlerContext) => async (args) => {
      const command = String((handlerContext as { commandName?: string }).commandName ?? "S3").replace(
        /Command$/,
        "",
      );
      const request = args.request as HttpRequestLike | undefined;
      const span = tracer.startSpan(
        `S3 ${command}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            "rpc.system": "aws-api",
            "rpc.service": "S3",
            "rpc.method": command,
            ...(request?.hostname ? { "server.address": request.hostname } : {}),
          },
        },
        context.active(),
      );
      if (request?.headers) {
        const headers = request.headers;
        telemetry.propagator.inject(trace.setSpan(context.active(), span), headers, {
          set: (carrier: Record<string, string>, key: string, value: string) => {
            carrier[key] = value;
          },
        });
      }
      try {
        const result = await next(args);
        const status = (result.response as { statusCode?: number } | undefined)?.statusCode;
        if (status) span.setAttribute("http.response.status_code", status);
        return result;
      } catch (error) {
        failSpan(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
    { step: "build", name: "plinthTracing", override: true },
  );
  return client;
}
