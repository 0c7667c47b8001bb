import { domainToASCII } from "node:url";
import { AppError } from "../errors.ts";
import { normaliseHost } from "../tenancy/hosts.ts";

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export interface HostnamePolicy {
  /** `Tenancy:Resolution:PlatformHost`: neither it nor its subdomains may be claimed by a tenant. */
  platformHost?: string;
  /** `AllowedHosts`: exact platform names a tenant may not claim either. */
  allowedHosts?: readonly string[];
}

/** Why a hostname was refused, or null when `hostname` is acceptable (already normalised). */
function refusal(raw: string, policy: HostnamePolicy): { reason: string } | { hostname: string } {
  const value = raw.trim();
  if (!value) return { reason: "a hostname is required" };
  if (/[\s/@?#\\]/.test(value)) return { reason: "a bare hostname only: no scheme, path or spaces" };
  if (value.includes(":")) return { reason: "no port (and no IP address)" };
  if (value.includes("*")) return { reason: "wildcards are not supported: add each hostname" };
  // one trailing dot is the same name written absolutely
  const bare = value.endsWith(".") ? value.slice(0, -1) : value;
  if (!bare || bare.endsWith(".")) return { reason: "not a valid hostname" };
  const ascii = domainToASCII(bare.toLowerCase());
  if (!ascii) return { reason: "not a valid hostname" };
  if (ascii.length > 253) return { reason: "at most 253 characters" };
  const labels = ascii.split(".");
  if (labels.length < 2) return { reason: "a fully qualified name (e.g. app.example.com)" };
  if (!labels.every((l) => LABEL.test(l))) return { reason: "not a valid hostname" };
  if (/^[0-9]+$/.test(labels[labels.length - 1] ?? "")) return { reason: "an IP address is not a hostname" };
  const platform = policy.platformHost ? normaliseHost(policy.platformHost) : null;
  if (platform && (ascii === platform || ascii.endsWith(`.${platform}`)))
    return { reason: "the platform host and its subdomains cannot be added" };
  for (const allowed of policy.allowedHosts ?? [])
    if (normaliseHost(allowed) === ascii) return { reason: "a platform host cannot be added" };
  return { hostname: ascii };
}

/**
 * A tenant's hostname as stored: lower case, punycode (IDN), one trailing dot dropped. Refused
 * (400 naming `hostname`): ports, IPs, wildcards, schemes/paths, invalid labels, single-label
 * names, the platform host and its subdomains. Uniqueness is the database's (409 on insert).
 */
export function validateHostname(raw: string, policy: HostnamePolicy): string {
  const result = refusal(raw, policy);
  if ("hostname" in result) return result.hostname;
  throw new AppError("validation_failed", "The hostname is not valid.", {
    fields: [{ path: "hostname", message: result.reason }],
  });
}

/** The TXT record name a tenant sets: `<prefix>.<hostname>`. */
export function verificationRecordName(prefix: string, hostname: string): string {
  return `${prefix}.${hostname}`;
}
