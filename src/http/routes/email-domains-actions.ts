import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `emailDomainsArea` declares (email-domains.ts): docs/audit.md's rows for them. */
export const EMAIL_DOMAINS_ACTIONS = {
  "email_domain.added": {
    what: "A tenant claimed an e-mail domain for single sign-on (pending until its TXT record is verified).",
    target: "`email_domain`",
    details: "`domain`",
    writtenBy: "`addEmailDomain`",
  },
  "email_domain.verified": {
    what: "A tenant's e-mail domain was verified by its TXT record (another tenant's verified claim, if any, lost it).",
    target: "`email_domain`",
    details: "`domain`, `movedFrom` (the tenant that lost it, when one did)",
    writtenBy: "`checkEmailDomain`",
  },
  "email_domain.removed": {
    what: "A tenant's e-mail domain was removed, by the tenant or because its unverified claim expired.",
    target: "`email_domain`",
    details: "`domain`; an expired claim also `reason` (`claim expired`) and `status`",
    writtenBy: "`removeEmailDomain`, `expireEmailDomainClaims` (actor: the tenant-domain loop)",
  },
  "email_domain.record_missing": {
    what: "A re-check found a verified e-mail domain's TXT record gone; the domain stays verified for `Sso:EmailDomainGraceDays`.",
    target: "`email_domain`",
    details: "`domain`, `code` (`dns_nxdomain`, `txt_missing`, `txt_mismatch`), `unverifiesAt`",
    writtenBy:
      "`applyVerifiedVerdict` (`recheckEmailDomains`, the tenant-domain loop; or `checkEmailDomain`)",
  },
  "email_domain.unverified": {
    what: "A verified e-mail domain's TXT record stayed gone through the grace: the domain is no longer verified.",
    target: "`email_domain`",
    details: "`domain`, `code`, `missingSince`",
    writtenBy:
      "`applyVerifiedVerdict` (`recheckEmailDomains`, the tenant-domain loop; or `checkEmailDomain`)",
  },
  "sso.enforcement_changed": {
    what: "A tenant turned SSO enforcement for its verified domains on or off.",
    target: "`tenant`",
    details: "`enforced`, `breakGlassUserId`",
    writtenBy: "`setSsoEnforcement`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
