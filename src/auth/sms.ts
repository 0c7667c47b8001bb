import type { Logger } from "../telemetry/logger.ts";

/** Sends a text message; the tenant (or null for platform staff) picks the provider. */
export interface SmsSender {
  send(message: { tenantId: string | null; to: string; text: string }): Promise<void>;
}

export function maskPhone(phone: string): string {
  return phone.length <= 4
    ? "****"
    : `${phone.slice(0, 3)}${"*".repeat(Math.max(phone.length - 5, 1))}${phone.slice(-2)}`;
}

/** Development: sends nothing, logs a masked notice (never the code). */
export function developmentSmsSender(logger: Logger): SmsSender {
  return {
    send: async ({ tenantId, to }) => {
      logger.warn("SMS not sent (development provider)", { to: maskPhone(to), tenantId });
    },
  };
}

export class SmsDeliveryError extends Error {
  override name = "SmsDeliveryError";
}

/**
 * A plain HTTP SMS gateway: `POST <url>` with `{ "to", "message" }` as JSON and the API key as a
 * Bearer token; any 2xx is accepted. 5 s timeout, no redirects.
 */
export function httpSmsSender(input: {
  url: string;
  apiKey: string;
  fetch?: typeof fetch;
  logger: Logger;
}): SmsSender {
  const doFetch = input.fetch ?? fetch;
  return {
    send: async ({ to, text, tenantId }) => {
      let response: Response;
      try {
        response = await doFetch(input.url, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${input.apiKey}` },
          body: JSON.stringify({ to, message: text }),
          redirect: "manual",
          signal: AbortSignal.timeout(5_000),
        });
      } catch (error) {
        throw new SmsDeliveryError(`SMS gateway unreachable: ${(error as Error).name}`);
      }
      if (!response.ok) throw new SmsDeliveryError(`SMS gateway answered ${response.status}`);
      input.logger.info("SMS sent", { to: maskPhone(to), tenantId });
    },
  };
}
