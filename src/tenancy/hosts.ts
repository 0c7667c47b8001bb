import { domainToASCII } from "node:url";

const LOCAL_HOSTS = ["localhost", "127.0.0.1", "[::1]"];

/** A Host header value as a bare host name: lower case, punycode, no port, no trailing dot. */
export function normaliseHost(value: string | null | undefined): string | null {
  if (!value) return null;
  let host = value.trim().toLowerCase();
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    return end > 0 ? host.slice(0, end + 1) : null;
  }
  const colon = host.lastIndexOf(":");
  if (colon >= 0) host = host.slice(0, colon);
  if (host.endsWith(".")) host = host.slice(0, -1);
  // plain ASCII names (nearly every request) need no IDNA conversion
  if (/^[a-z0-9.-]+$/.test(host)) return host.length > 0 ? host : null;
  const ascii = domainToASCII(host);
  return ascii || null;
}

export interface HostPolicy {
  /** A configured host (AllowedHosts, the platform host, or Development's local defaults). */
  isPlatformHost(host: string): boolean;
}

/**
 * `AllowedHosts` lists exact names (the port is ignored). With none configured, Development
 * accepts localhost, 127.0.0.1 and [::1] so an unconfigured local run works; Production refuses
 * to start without a list. Active tenant domains are accepted separately (`resolveTenancy`,
 * http/middleware/tenancy.ts).
 */
export function createHostPolicy(input: {
  allowedHosts: readonly string[];
  platformHost: string | undefined;
  environment: string;
}): HostPolicy {
  const hosts = new Set(
    input.allowedHosts.map((h) => normaliseHost(h)).filter((h): h is string => h !== null),
  );
  if (input.platformHost) {
    const platform = normaliseHost(input.platformHost);
    if (platform) hosts.add(platform);
  }
  if (input.allowedHosts.length === 0 && input.environment === "Development")
    for (const h of LOCAL_HOSTS) hosts.add(h);
  return { isPlatformHost: (host) => hosts.has(host) };
}
