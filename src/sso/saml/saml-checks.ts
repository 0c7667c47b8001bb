/**
 * The checks a SAML response goes through, named, with the words a test sign-in reports for each
 * (docs/sso.md, "What the ACS checks"). node-saml throws plain `Error`s; `checkOfError` turns its
 * messages into these.
 */
export const SAML_CHECKS = {
  format: "the POST carries a base64 SAML Response that is well-formed XML",
  status: "the identity provider answered Success",
  signature: "the response or its assertion is signed by a certificate from the IdP's metadata",
  structure: "exactly one assertion, the one the signature covers",
  issuer: "the issuer is the IdP's entity id",
  in_response_to: "it answers an AuthnRequest Plinth sent, unanswered and unexpired",
  clock: "NotBefore / NotOnOrAfter hold at this time (with the allowed clock skew)",
  audience: "the audience is this connection's SP entity id",
  recipient: "the subject confirmation's Recipient is this connection's ACS URL",
  destination: "the response's Destination, when given, is this connection's ACS URL",
  replay: "the assertion id has not been used before",
  email: "the assertion names an e-mail address",
} as const;
export type SamlCheck = keyof typeof SAML_CHECKS;

/** A refused response: which check failed and why, in words. */
export class SamlRefusal extends Error {
  override name = "SamlRefusal";
  constructor(
    readonly check: SamlCheck,
    readonly reason: string,
  ) {
    super(`${check}: ${reason}`);
  }
}

/** node-saml's message (or ours) as the check it failed, in words an operator can act on. */
export function checkOfError(error: unknown, hasSignature: boolean): SamlRefusal {
  if (error instanceof SamlRefusal) return error;
  const message = error instanceof Error ? error.message : String(error);
  const rules: [RegExp, SamlCheck, string][] = [
    [
      /multiple assertions|Too many signatures|Cannot obtain assertion/i,
      "structure",
      "signature wrapping: the signed element is not the one assertion of the response",
    ],
    [
      /Invalid signature|Invalid document signature|No response found/i,
      "signature",
      hasSignature
        ? "the signature does not verify with the IdP's certificate: the document was changed after signing or signed by another key"
        : "unsigned assertion: neither the response nor the assertion is signed",
    ],
    [
      /Unknown SAML issuer|Missing SAML issuer/i,
      "issuer",
      "wrong issuer: the assertion's Issuer is not the IdP's entity id from its metadata",
    ],
    [
      /No valid subject confirmation/i,
      "clock",
      "clock skew: the assertion has expired (its subject confirmation's NotOnOrAfter is past beyond the allowed skew, or its NotBefore ahead)",
    ],
    [
      /InResponseTo|SubjectInResponseTo/i,
      "in_response_to",
      "it does not answer a pending sign-in request (unknown, expired, already answered, or IdP-initiated)",
    ],
    [
      /not yet valid/i,
      "clock",
      "clock skew: the assertion is not valid yet (NotBefore is in the future beyond the allowed skew)",
    ],
    [
      /expired/i,
      "clock",
      "clock skew: the assertion has expired (NotOnOrAfter is past beyond the allowed skew)",
    ],
    [
      /audience|AudienceRestriction/i,
      "audience",
      "wrong audience: the assertion is not addressed to this connection's SP entity id",
    ],
    [
      /SAML provider returned/i,
      "status",
      `the IdP refused the sign-in: ${message.replace(/^SAML provider returned /, "")}`,
    ],
    [/Missing SAML assertion|Unknown SAML response/i, "structure", "the response carries no assertion"],
    [/not a valid XML|Not a valid XML|\[xmldom/i, "format", "the SAMLResponse is not well-formed XML"],
  ];
  for (const [pattern, check, reason] of rules)
    if (pattern.test(message)) return new SamlRefusal(check, reason);
  return new SamlRefusal("structure", "the response is not a SAML response Plinth can read");
}
