import type { ResolvedProvider, TenantProvider } from "../providers/tenant-providers.ts";
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

/**
 * The SMS provider for each message: the tenant's own Active `sms` provider (its API key read from
 * the tenant's secrets), nothing when the tenant's provider is Disabled or Suspended (the global
 * default never bypasses that), and the global default only for tenants with no provider row and
 * for platform staff.
 */
export function tenantAwareSmsSender(input: {
  global: SmsSender;
  resolve: (tenantId: string) => Promise<ResolvedProvider>;
  secrets: (provider: TenantProvider) => Promise<Record<string, string>>;
  logger: Logger;
  fetch?: typeof fetch;
}): SmsSender {
  return {
    send: async (message) => {
      if (!message.tenantId) return input.global.send(message);
      const resolved = await input.resolve(message.tenantId);
      if (!resolved) throw new SmsDeliveryError("the tenant has no active SMS provider");
      if (resolved.source === "global") return input.global.send(message);
      const provider = resolved.provider;
      if (provider.provider === "development") return developmentSmsSender(input.logger).send(message);
      if (provider.provider !== "http")
        throw new SmsDeliveryError(`unsupported SMS provider "${provider.provider}"`);
      const url = provider.settings.url;
      const { apiKey } = await input.secrets(provider);
      if (typeof url !== "string" || !apiKey)
        throw new SmsDeliveryError("the tenant's SMS provider lacks url or apiKey");
      return httpSmsSender({ url, apiKey, logger: input.logger, fetch: input.fetch }).send(message);
    },
  };
}
