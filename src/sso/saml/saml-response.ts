import type { CacheProvider, Profile } from "@node-saml/node-saml";
import { and, eq, lt } from "drizzle-orm";
import type { Clock } from "../../clock.ts";
import type { TenantCtx } from "../../context.ts";
import { type DatabaseDeps, withTransaction } from "../../db/operation.ts";
import { samlAssertions } from "../../db/schema/saml.ts";
import { checkOfError, SAML_CHECKS, type SamlCheck, SamlRefusal } from "./saml-checks.ts";
import {
  SAML_CLOCK_SKEW_MS,
  SAML_MIN_REPLAY_MEMORY_MS,
  type SamlConnection,
  type ServiceProvider,
  samlFor,
} from "./saml-service-provider.ts";
import { NotXml, parseXml, selectAttributeValues, selectElements, type XmlDocument } from "./saml-xml.ts";

export interface SamlResponseDeps extends DatabaseDeps {
  clock: Clock;
}

/** Who the IdP says signed in, read from the signed assertion only. */
export interface SamlIdentity {
  email: string;
  name: string | null;
  groups: string[];
  nameId: string;
  assertionId: string;
}

/** The AuthnRequest Plinth sent for this sign-in (kept with the sign-in attempt). */
export interface SentRequest {
  requestId: string;
  createdAt: Date;
}

/** One check, in words: a test sign-in lists them all; a refused sign-in's audit row names the failed one. */
export interface SamlCheckResult {
  check: SamlCheck;
  ok: boolean;
  detail: string;
}

export interface CheckedResponse {
  /** Every check made, the failed ones first (the first is the one that decided). */
  checks: SamlCheckResult[];
  /** Set only when every check passed. */
  identity: SamlIdentity | null;
}

const DSIG = "http://www.w3.org/2000/09/xmldsig#";
const SUCCESS = "urn:oasis:names:tc:SAML:2.0:status:Success";
const EMAIL = /^[^\s@<>"]+@[^\s@<>"]+\.[^\s@<>"]+$/;

async function parse(xml: string): Promise<XmlDocument> {
  try {
    return await parseXml(xml);
  } catch (error) {
    if (error instanceof NotXml) throw new SamlRefusal("format", `the SAMLResponse is ${error.message}`);
    throw error;
  }
}

const CONFIRMATION_DATA =
  "./*[local-name()='Subject']/*[local-name()='SubjectConfirmation']/*[local-name()='SubjectConfirmationData']";

/**
 * node-saml's request-id store, answering for the one request this sign-in sent, once. node-saml
 * judges the request's age by the process's time; `clockOffsetMs` (the process's time less Plinth's
 * clock) carries the request's age by Plinth's clock over to it.
 */
function sentRequestStore(request: SentRequest | null, clockOffsetMs: number): CacheProvider {
  let spent = false;
  return {
    saveAsync: async () => null,
    getAsync: async (key) =>
      request && !spent && key === request.requestId
        ? new Date(request.createdAt.getTime() + clockOffsetMs).toISOString()
        : null,
    removeAsync: async (key) => {
      if (key && key === request?.requestId) spent = true;
      return key;
    },
  };
}

/**
 * What node-saml does not check, on the signed assertion: its id, Recipient, that it expires, and
 * its validity window (Conditions and SubjectConfirmationData NotBefore / NotOnOrAfter, with the
 * allowed skew) by Plinth's clock (`nowMs`): node-saml would judge it by the process's time.
 */
async function readAssertion(assertionXml: string, sp: ServiceProvider, nowMs: number) {
  const assertion = (await parse(assertionXml)).documentElement;
  if (!assertion) throw new SamlRefusal("structure", "the response carries no assertion");
  const assertionId = assertion.getAttribute("ID");
  if (!assertionId) throw new SamlRefusal("structure", "the assertion has no ID");
  const recipients = selectAttributeValues(assertion, `${CONFIRMATION_DATA}/@Recipient`);
  if (!recipients.includes(sp.acsUrl))
    throw new SamlRefusal(
      "recipient",
      `wrong recipient: the assertion is for ${recipients[0] ?? "no Recipient"}, not ${sp.acsUrl}`,
    );
  const expiries = [
    ...selectAttributeValues(assertion, "./*[local-name()='Conditions']/@NotOnOrAfter"),
    ...selectAttributeValues(assertion, `${CONFIRMATION_DATA}/@NotOnOrAfter`),
  ]
    .map((value) => Date.parse(value))
    .filter((ms) => Number.isFinite(ms));
  if (expiries.length === 0)
    throw new SamlRefusal("clock", "the assertion states no NotOnOrAfter: it would never expire");
  const expiresAtMs = Math.min(...expiries);
  const starts = [
    ...selectAttributeValues(assertion, "./*[local-name()='Conditions']/@NotBefore"),
    ...selectAttributeValues(assertion, `${CONFIRMATION_DATA}/@NotBefore`),
  ].map((value) => Date.parse(value));
  if (starts.some((ms) => !Number.isFinite(ms) || nowMs + SAML_CLOCK_SKEW_MS < ms))
    throw new SamlRefusal(
      "clock",
      "clock skew: the assertion is not valid yet (NotBefore is in the future beyond the allowed skew)",
    );
  if (nowMs - SAML_CLOCK_SKEW_MS >= expiresAtMs)
    throw new SamlRefusal(
      "clock",
      "clock skew: the assertion has expired (NotOnOrAfter is past beyond the allowed skew)",
    );
  return { assertionId, expiresAtMs };
}

const text = (value: unknown): string | null => {
  if (typeof value === "string") return value.trim() || null;
  if (Array.isArray(value)) return text(value[0]);
  return null;
};

/** The e-mail, name and groups the mapping names, from the signed assertion's attributes and NameID. */
function identityOf(profile: Profile, connection: SamlConnection, assertionId: string): SamlIdentity {
  const attributes = (profile.attributes ?? {}) as Record<string, unknown>;
  const mapping = connection.attributeMapping;
  const nameId = profile.nameID ?? "";
  const email = text(attributes[mapping.email]) ?? (EMAIL.test(nameId) ? nameId : null);
  if (!email || !EMAIL.test(email))
    throw new SamlRefusal(
      "email",
      `no e-mail address: neither the "${mapping.email}" attribute nor the NameID holds one`,
    );
  const rawGroups = attributes[mapping.groups];
  const groups = (Array.isArray(rawGroups) ? rawGroups : [rawGroups]).filter(
    (g): g is string => typeof g === "string" && g.length > 0,
  );
  return { email: email.toLowerCase(), name: text(attributes[mapping.name]), groups, nameId, assertionId };
}

/** Remembers the assertion id until it expires; false when it was already there (a replay). */
async function rememberAssertion(
  deps: SamlResponseDeps,
  ctx: TenantCtx,
  connectionId: string,
  assertion: { assertionId: string; expiresAtMs: number },
): Promise<boolean> {
  const now = deps.clock.now();
  const expiresAt = new Date(
    Math.max(assertion.expiresAtMs + SAML_CLOCK_SKEW_MS, now.getTime() + SAML_MIN_REPLAY_MEMORY_MS),
  );
  return withTransaction(deps, ctx, async (tx) => {
    await tx
      .delete(samlAssertions)
      .where(and(eq(samlAssertions.connectionId, connectionId), lt(samlAssertions.expiresAt, now)));
    const inserted = await tx
      .insert(samlAssertions)
      .values({ tenantId: ctx.tenantId, connectionId, assertionId: assertion.assertionId, expiresAt })
      .onConflictDoNothing()
      .returning({ id: samlAssertions.id });
    return inserted.length > 0;
  });
}

const passed = (check: SamlCheck): SamlCheckResult => ({ check, ok: true, detail: SAML_CHECKS[check] });
const failed = (refusal: SamlRefusal): SamlCheckResult => ({
  check: refusal.check,
  ok: false,
  detail: refusal.reason,
});

/**
 * Checks a POSTed `SAMLResponse` for one connection (docs/sso.md, "What the ACS checks"). node-saml
 * verifies the XML signature (of the response or the assertion, by a certificate from the IdP's
 * metadata; the assertion used is the one the signature covers, and a response with more than one
 * is refused), the issuer, InResponseTo against the request this sign-in sent (`request`; none: an
 * IdP-initiated response, refused), NotBefore / NotOnOrAfter with the allowed skew and the audience.
 * Then Plinth checks the Destination and Recipient, that the assertion expires, its id against
 * replays (remembered in `saml_assertions`), and maps the attributes.
 */
export async function checkSamlResponse(
  deps: SamlResponseDeps,
  ctx: TenantCtx,
  input: {
    connection: SamlConnection;
    sp: ServiceProvider;
    samlResponse: string;
    request: SentRequest | null;
  },
): Promise<CheckedResponse> {
  const { connection, sp } = input;
  let document: XmlDocument;
  try {
    if (!/^[A-Za-z0-9+/=\s]+$/.test(input.samlResponse))
      throw new SamlRefusal("format", "the SAMLResponse is not base64");
    document = await parse(Buffer.from(input.samlResponse, "base64").toString("utf8"));
  } catch (error) {
    return { checks: [failed(checkOfError(error, false))], identity: null };
  }
  const failures: SamlRefusal[] = [];
  const destination = document.documentElement?.getAttribute("Destination");
  if (destination && destination !== sp.acsUrl)
    failures.push(
      new SamlRefusal("destination", `wrong destination: the response is addressed to ${destination}`),
    );
  const status = selectAttributeValues(
    document,
    "/*[local-name()='Response']/*[local-name()='Status']/*[local-name()='StatusCode']/@Value",
  )[0];
  if (status !== SUCCESS)
    failures.push(
      new SamlRefusal(
        "status",
        `the IdP refused the sign-in: status ${status?.replace(/^.*:/, "") ?? "missing"}`,
      ),
    );
  const hasSignature =
    selectElements(document, `//*[local-name()='Signature' and namespace-uri()='${DSIG}']`).length > 0;
  let identity: SamlIdentity | null = null;
  try {
    const nowMs = deps.clock.now().getTime();
    const saml = samlFor(connection, sp, sentRequestStore(input.request, Date.now() - nowMs));
    const { profile } = await saml.validatePostResponseAsync({ SAMLResponse: input.samlResponse });
    if (!profile?.getAssertionXml) throw new SamlRefusal("structure", "the response carries no assertion");
    // node-saml checks the issuer of logout messages only: the signed assertion's is checked here
    if (profile.issuer !== connection.settings.idpEntityId)
      throw new SamlRefusal(
        "issuer",
        `wrong issuer: the assertion's Issuer is ${profile.issuer ?? "missing"}, not the IdP's entity id ${connection.settings.idpEntityId}`,
      );
    const assertion = await readAssertion(profile.getAssertionXml(), sp, nowMs);
    identity = identityOf(profile, connection, assertion.assertionId);
    if (failures.length === 0 && !(await rememberAssertion(deps, ctx, connection.id, assertion)))
      throw new SamlRefusal("replay", "replayed assertion: this assertion id was already used to sign in");
  } catch (error) {
    failures.unshift(checkOfError(error, hasSignature));
  }
  if (failures.length > 0) return { checks: failures.map(failed), identity: null };
  return { checks: (Object.keys(SAML_CHECKS) as SamlCheck[]).map(passed), identity };
}
