import type { Settings } from "../config/schema.ts";
import type { DnsResolver } from "../custom-domains/dns.ts";
import { verificationRecordName } from "../custom-domains/hostname-policy.ts";

/** What a TXT lookup says of an e-mail domain's claim: its record holds the claim's value, or why not. */
export type EmailDomainVerdict =
  | { holds: true }
  | {
      holds: false;
      /** `dns_error`: the resolver failed, which proves nothing; the others are DNS's own answer. */
      code: "dns_nxdomain" | "dns_error" | "txt_missing" | "txt_mismatch";
      reason: string;
    };

/** Looks up `<VerificationRecordPrefix>.<domain>` TXT and judges it against the claim's value. */
export async function emailDomainVerdict(
  settings: Settings["TenantDomains"],
  resolver: DnsResolver,
  claim: { domain: string; verificationToken: string },
): Promise<EmailDomainVerdict> {
  const name = verificationRecordName(settings.VerificationRecordPrefix, claim.domain);
  const answer = await resolver.query(name, "TXT");
  if (answer.kind === "nxdomain")
    return { holds: false, code: "dns_nxdomain", reason: `${name} does not exist (NXDOMAIN).` };
  if (answer.kind === "error")
    return { holds: false, code: "dns_error", reason: `The TXT lookup of ${name} failed: ${answer.detail}.` };
  if (answer.records.some((value) => value.trim() === claim.verificationToken)) return { holds: true };
  if (answer.records.length === 0)
    return { holds: false, code: "txt_missing", reason: `No TXT record at ${name}.` };
  return {
    holds: false,
    code: "txt_mismatch",
    reason: `The TXT record at ${name} does not hold this domain's value.`,
  };
}
