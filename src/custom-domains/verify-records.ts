import type { DnsAnswer, DnsResolver } from "./dns.ts";
import { type GatewayClient, GatewayError, type GatewayHostname } from "./gateway.ts";

/** Why a check failed: stable codes clients and operators may rely on (docs/domains.md). */
export const failureCodes = [
  "dns_nxdomain",
  "dns_error",
  "txt_missing",
  "txt_mismatch",
  "cname_missing",
  "cname_mismatch",
  "gateway_error",
  // the TXT record does not hold this claim's value and another tenant has the name Active
  "in_use_elsewhere",
  // this domain was Active; another tenant proved ownership through its own TXT record
  "ownership_moved",
] as const;
export type FailureCode = (typeof failureCodes)[number];

export type CheckOutcome =
  | { ok: true; cnameTarget: string; gateway: GatewayHostname }
  | { ok: false; code: FailureCode; reason: string; cnameTarget: string | null };

export interface CheckInput {
  hostname: string;
  token: string;
  /** `<VerificationRecordPrefix>.<hostname>` */
  recordName: string;
  /** Normalised allowed CNAME targets (non-empty). */
  targets: readonly string[];
}

function dnsFailure(answer: Exclude<DnsAnswer, { kind: "ok" }>, name: string, type: string) {
  return answer.kind === "nxdomain"
    ? { code: "dns_nxdomain" as const, reason: `${name} does not exist (NXDOMAIN).` }
    : { code: "dns_error" as const, reason: `The ${type} lookup of ${name} failed: ${answer.detail}.` };
}

/**
 * One verification of a domain: the TXT record must hold the token, the hostname's CNAME must be
 * an allowed target, then the hostname is registered with the gateway (looked up first, so a
 * retried check never double-creates). The first failing step is the reason.
 */
export async function verifyDomainRecords(
  services: { resolver: DnsResolver; gateway: GatewayClient },
  input: CheckInput,
): Promise<CheckOutcome> {
  const [txt, cname] = await Promise.all([
    services.resolver.query(input.recordName, "TXT"),
    services.resolver.query(input.hostname, "CNAME"),
  ]);
  const cnameTarget = cname.kind === "ok" ? (cname.records[0] ?? null) : null;
  const fail = (f: { code: FailureCode; reason: string }): CheckOutcome => ({ ok: false, cnameTarget, ...f });

  if (txt.kind !== "ok") return fail(dnsFailure(txt, input.recordName, "TXT"));
  if (txt.records.length === 0)
    return fail({ code: "txt_missing", reason: `No TXT record at ${input.recordName}.` });
  if (!txt.records.some((value) => value.trim() === input.token))
    return fail({
      code: "txt_mismatch",
      reason: `The TXT record at ${input.recordName} does not hold this domain's verification value.`,
    });

  if (cname.kind !== "ok") return fail(dnsFailure(cname, input.hostname, "CNAME"));
  if (!cnameTarget)
    return fail({
      code: "cname_missing",
      reason: `${input.hostname} has no CNAME record; point it at ${input.targets.join(" or ")}.`,
    });
  if (!input.targets.includes(cnameTarget))
    return fail({
      code: "cname_mismatch",
      reason: `${input.hostname} points at ${cnameTarget}, not at ${input.targets.join(" or ")}.`,
    });

  try {
    const gateway = await services.gateway.ensure(input.hostname);
    return { ok: true, cnameTarget, gateway };
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    return fail({ code: "gateway_error", reason: `The TLS gateway refused or failed: ${error.message}.` });
  }
}
