import type { Settings } from "../config/schema.ts";
import type { Fetch } from "../telemetry/fetch.ts";
import type { Logger } from "../telemetry/logger.ts";
import { createDohResolver, type DnsResolver } from "./dns.ts";
import { createGatewayClient, type GatewayClient } from "./gateway.ts";

export type DomainSettings = Settings["TenantDomains"];

/** The `TenantDomains:*` keys verification needs that are not set (empty: the loop may verify). */
export function missingDomainSettings(s: DomainSettings): string[] {
  const missing: string[] = [];
  if (s.AllowedCnameTargets.filter((t) => t.trim()).length === 0)
    missing.push("TenantDomains:AllowedCnameTargets");
  if (!s.DnsJsonEndpoint) missing.push("TenantDomains:DnsJsonEndpoint");
  if (!s.GatewayBaseUrl) missing.push("TenantDomains:GatewayBaseUrl");
  if (!s.GatewayApiKey) missing.push("TenantDomains:GatewayApiKey");
  return missing;
}

/** Allowed CNAME targets as compared: lower case, no trailing dot. */
export function cnameTargets(s: DomainSettings): string[] {
  return s.AllowedCnameTargets.map((t) => t.trim().toLowerCase().replace(/\.$/, "")).filter(Boolean);
}

export function gatewayClient(s: DomainSettings, logger?: Logger, fetch?: Fetch): GatewayClient | null {
  if (!s.GatewayBaseUrl || !s.GatewayApiKey) return null;
  return createGatewayClient({
    fetch,
    baseUrl: s.GatewayBaseUrl,
    apiKey: s.GatewayApiKey,
    timeoutMs: s.GatewayTimeoutMs,
    retries: s.GatewayRetries,
    logger,
  });
}

export function dnsResolver(s: DomainSettings, fetch?: Fetch): DnsResolver {
  return createDohResolver({ endpoint: s.DnsJsonEndpoint, timeoutMs: s.DnsTimeoutMs, fetch });
}

/** Delay before the next check after `attempts` failed ones: base·2^(attempts−1), capped. */
export function retryDelayMs(s: DomainSettings, attempts: number): number {
  const exponent = Math.min(Math.max(attempts - 1, 0), 30);
  return Math.min(s.RetryBaseSeconds * 2 ** exponent, s.RetryMaxSeconds) * 1000;
}
