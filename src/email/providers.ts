import type { Settings } from "../config/schema.ts";
import type { ResolvedProvider, TenantProvider } from "../providers/tenant-providers.ts";
import type { Logger } from "../telemetry/logger.ts";
import {
  developmentEmailSender,
  EmailDeliveryError,
  type EmailProviderChoice,
  httpEmailSender,
  noEmailSender,
  smtpSender,
} from "./senders.ts";

type EmailSettings = Settings["Email"];

/** Picks the provider of each message: the tenant's own `notification` provider, else the platform's. */
export interface EmailProviders {
  /** Throws `EmailDeliveryError` when the tenant's provider is Disabled, Suspended or unusable. */
  choose(tenantId: string | null): Promise<EmailProviderChoice>;
}

const SECURITIES = ["none", "starttls", "tls"] as const;

/** A tenant's provider row as a sender: `smtp`, `http` or `development`. */
async function tenantChoice(
  provider: TenantProvider,
  input: {
    secrets: (provider: TenantProvider) => Promise<Record<string, string>>;
    logger: Logger;
    fetch?: typeof fetch;
    timeoutMs: number;
    trustedCa?: string[];
  },
): Promise<EmailProviderChoice> {
  const settings = provider.settings;
  const from = typeof settings.from === "string" && settings.from ? settings.from : undefined;
  if (provider.provider === "development") return { sender: developmentEmailSender(input.logger), from };
  const secrets = await input.secrets(provider);
  if (provider.provider === "smtp") {
    const security = SECURITIES.find((s) => s === settings.security) ?? "starttls";
    if (typeof settings.host !== "string" || !settings.host)
      throw new EmailDeliveryError("the tenant's SMTP provider has no host");
    return {
      sender: smtpSender({
        host: settings.host,
        port: typeof settings.port === "number" ? settings.port : undefined,
        security,
        username: typeof settings.username === "string" ? settings.username : undefined,
        password: secrets.password,
        trustedCa: input.trustedCa,
        timeoutMs: input.timeoutMs,
      }),
      from,
    };
  }
  if (provider.provider === "http") {
    if (typeof settings.url !== "string" || !secrets.apiKey)
      throw new EmailDeliveryError("the tenant's e-mail API provider lacks url or apiKey");
    return {
      sender: httpEmailSender({
        url: settings.url,
        apiKey: secrets.apiKey,
        fetch: input.fetch,
        timeoutMs: input.timeoutMs,
      }),
      from,
    };
  }
  throw new EmailDeliveryError(`unsupported notification provider "${provider.provider}"`);
}

/**
 * The provider of each message: the tenant's own Active `notification` provider (its secrets read
 * from the tenant's secrets), none when the tenant's provider is Disabled or Suspended (the platform
 * default never bypasses that), and the platform default for tenants without a provider row and
 * for platform staff.
 */
export function tenantAwareEmailProviders(input: {
  platform: EmailProviderChoice;
  resolve: (tenantId: string) => Promise<ResolvedProvider>;
  secrets: (provider: TenantProvider) => Promise<Record<string, string>>;
  logger: Logger;
  fetch?: typeof fetch;
  timeoutMs: number;
  /** `Email:Smtp:TrustedCaFile`: trusted for tenants' SMTP servers too. */
  trustedCa?: string[];
}): EmailProviders {
  return {
    choose: async (tenantId) => {
      if (!tenantId) return input.platform;
      const resolved = await input.resolve(tenantId);
      if (!resolved) throw new EmailDeliveryError("the tenant's notification provider is not active");
      if (resolved.source === "global") return input.platform;
      return tenantChoice(resolved.provider, input);
    },
  };
}

/** The platform default of `Email:*`: `smtp`, `http`, or `development` (outside Development: none). */
export function platformEmailProvider(input: {
  settings: EmailSettings;
  environment: string;
  trustedCa?: string[];
  logger: Logger;
  fetch?: typeof fetch;
}): EmailProviderChoice & { name: "smtp" | "http" | "development" | "none" } {
  const { settings } = input;
  const timeoutMs = settings.TimeoutSeconds * 1000;
  const name =
    settings.Provider ?? (settings.Smtp.Host ? "smtp" : settings.Http.Url ? "http" : "development");
  if (name === "smtp") {
    if (!settings.Smtp.Host) throw new Error("Email:Provider is smtp but Email:Smtp:Host is not set");
    return {
      name,
      sender: smtpSender({
        host: settings.Smtp.Host,
        port: settings.Smtp.Port,
        security: settings.Smtp.Security,
        username: settings.Smtp.Username,
        password: settings.Smtp.Password,
        trustedCa: input.trustedCa,
        timeoutMs,
      }),
    };
  }
  if (name === "http") {
    if (!settings.Http.Url || !settings.Http.ApiKey)
      throw new Error("Email:Provider is http but Email:Http:Url or Email:Http:ApiKey is not set");
    return {
      name,
      sender: httpEmailSender({
        url: settings.Http.Url,
        apiKey: settings.Http.ApiKey,
        fetch: input.fetch,
        timeoutMs,
      }),
    };
  }
  if (input.environment === "Development") return { name, sender: developmentEmailSender(input.logger) };
  return { name: "none", sender: noEmailSender };
}
