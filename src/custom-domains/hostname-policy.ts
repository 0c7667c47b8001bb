import { AppError } from "../errors.ts";
import { parseHostname } from "../tenancy/hostnames.ts";
import { normaliseHost } from "../tenancy/hosts.ts";

export { parseHostHeader, parseHostname } from "../tenancy/hostnames.ts";

export interface HostnamePolicy {
  /** `Tenancy:Resolution:PlatformHost`: neither it nor its subdomains may be claimed by a tenant. */
  platformHost?: string;
  /** `AllowedHosts`: exact platform names a tenant may not claim either. */
  allowedHosts?: readonly string[];
  /** `TenantDomains:DeniedSuffixes`. */
  deniedSuffixes?: readonly string[];
}

/**
 * A tenant's hostname as registered, in its canonical form. Hostnames are case-insensitive: ASCII
 * upper case is folded and one trailing dot (the fully qualified form) dropped; the rest must be
 * canonical already (src/tenancy/hostnames.ts — IDNs as xn--, no port; non-ASCII, internal names,
 * private-address encodings and mixed-script labels refused), and not the platform host, one of
 * its subdomains or an AllowedHosts name. Refused: 400 naming `hostname`.
 */
export function validateHostname(raw: string, policy: HostnamePolicy): string {
  const folded = raw.replace(/[A-Z]/g, (ch) => ch.toLowerCase()).replace(/\.$/, "");
  const parsed = parseHostname(folded, { deniedSuffixes: policy.deniedSuffixes });
  let reason = parsed.ok ? null : parsed.reason;
  if (parsed.ok) {
    const platform = policy.platformHost ? normaliseHost(policy.platformHost) : null;
    if (platform && (parsed.hostname === platform || parsed.hostname.endsWith(`.${platform}`)))
      reason = "the platform host and its subdomains cannot be added";
    else if ((policy.allowedHosts ?? []).some((allowed) => normaliseHost(allowed) === parsed.hostname))
      reason = "a platform host cannot be added";
    else return parsed.hostname;
  }
  throw new AppError("validation_failed", "The hostname is not valid.", {
    fields: [{ path: "hostname", message: reason ?? "not a valid hostname" }],
  });
}

/** The TXT record name a tenant sets: `<prefix>.<hostname>`. */
export function verificationRecordName(prefix: string, hostname: string): string {
  return `${prefix}.${hostname}`;
}
