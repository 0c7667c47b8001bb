import { generateKeyPairSync, type KeyObject } from "node:crypto";
import {
  type CryptoKey,
  decodeProtectedHeader,
  errors,
  exportJWK,
  importPKCS8,
  importSPKI,
  type JWK,
  type JWTPayload,
  jwtVerify,
  SignJWT,
} from "jose";
import { type Clock, epochMs } from "../clock.ts";
import type { AppConfig } from "../config/load.ts";
import { parseJwtKeys } from "../security/jwt-keys.ts";
import type { Logger } from "../telemetry/logger.ts";
import { VerifiedTokens } from "./verified-tokens.ts";

const ALG = "RS256";
/** The media type of an access token (RFC 9068 §2.1): the `typ` header of every token issued. */
export const ACCESS_TOKEN_TYP = "at+jwt";
/** What tokens said before RFC 9068: accepted only as described at `legacyTypAccepted`. */
const LEGACY_TYP = "JWT";
/**
 * How many verified tokens a process remembers (`VerifiedTokens`): about 1 KB each, so at most
 * ~10 MB; one per signed-in client active within a token's lifetime fits well below it.
 */
export const VERIFIED_TOKENS_MAX = 10_000;
/** Leeway for exp/nbf between servers' clocks. */
export const CLOCK_TOLERANCE_SECONDS = 30;

/**
 * The `acr` of a sign-in with a second factor (tokens whose `amr` holds `mfa` state it; a step-up
 * challenge asks for it in `acr_values`): the OpenID PAPE multi-factor policy URI.
 */
export const MFA_ACR = "http://schemas.openid.net/pape/policies/2007/06/multi-factor";

/** What an access token says about its bearer. */
export interface AccessClaims {
  userId: string;
  tenantId: string | null;
  sessionId: string;
  roles: string[];
  platformRoles: string[];
  /** The password must be changed before anything else is allowed. */
  passwordChangeRequired: boolean;
  /** An impersonation: the platform admin acting as the user (`act: { sub }`, RFC 8693 §4.1). */
  impersonatorId?: string;
  /** How the user authenticated (`amr`, RFC 8176: `pwd`, `sms`, `otp`, `hwk`, `swk`, `mfa`). */
  amr: string[];
  /** When the user authenticated (`auth_time`, seconds since the epoch): the sign-in or a step-up. */
  authTime: number;
}

export class InvalidTokenError extends Error {
  override name = "InvalidTokenError";
}

export interface TokenService {
  readonly currentKeyId: string;
  readonly accessTokenSeconds: number;
  /** Tokens typed `JWT` (issued before the `at+jwt` upgrade) are accepted only if issued before this. */
  readonly legacyTypCutOff: Date;
  issueAccessToken(claims: AccessClaims): Promise<string>;
  verifyAccessToken(token: string): Promise<AccessClaims>;
  /**
   * The claims of a token this process has verified already and that has not expired, without an
   * await; undefined otherwise (then `verifyAccessToken` decides).
   */
  rememberedAccessToken(token: string): AccessClaims | undefined;
  /** The public keys of the verification set, as published at /.well-known/jwks.json. */
  jwks(): { keys: JWK[] };
}

interface SigningMaterial {
  currentKeyId: string;
  privateKey: KeyObject;
  verificationKeys: Map<string, KeyObject>;
}

function developmentMaterial(logger: Logger, environment: string): SigningMaterial {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const currentKeyId = `dev-${crypto.randomUUID().slice(0, 8)}`;
  logger.warn(
    "Security:Jwt has no keys: signing with an EPHEMERAL key pair. Tokens die with this process and no other replica accepts them: fine for one Development process, set the keys anywhere else.",
    { kid: currentKeyId, environment },
  );
  return { currentKeyId, privateKey, verificationKeys: new Map([[currentKeyId, publicKey]]) };
}

/**
 * Whether a token typed `JWT` (not `at+jwt`) is still accepted: only one issued before the cut-over
 * (this process's start: every replica of a version that issues `at+jwt` starts after the last
 * `JWT` token of the previous version was issued or while it is being replaced), and only within
 * one access-token lifetime of its issue whatever its `exp` says. So no `JWT` token lives longer
 * than it would have before the upgrade; a restart moves the cut-over, but every `JWT` token is by
 * then expired. See docs/decisions.md.
 */
function legacyTypAccepted(
  payload: JWTPayload,
  cutOffSeconds: number,
  lifetime: number,
  now: number,
): boolean {
  const iat = payload.iat;
  return typeof iat === "number" && iat <= cutOffSeconds && now < iat + lifetime + CLOCK_TOLERANCE_SECONDS;
}

/** The signing key and the verification set as jose keys, and the set as published (JWKS). */
async function importKeys(material: SigningMaterial) {
  const signingKey = await importPKCS8(
    material.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    ALG,
  );
  const verifiers = new Map<string, CryptoKey>();
  const published: JWK[] = [];
  for (const [kid, key] of material.verificationKeys) {
    const imported = await importSPKI(key.export({ type: "spki", format: "pem" }).toString(), ALG, {
      extractable: true,
    });
    verifiers.set(kid, imported);
    published.push({ ...(await exportJWK(imported)), kid, alg: ALG, use: "sig" });
  }
  return { signingKey, verifiers, published };
}

const strings = (value: unknown) => (Array.isArray(value) ? value.filter((v) => typeof v === "string") : []);

/** What a verified token says, or why it says too little. */
function claimsOf(payload: JWTPayload): AccessClaims {
  if (typeof payload.sub !== "string" || typeof payload.sid !== "string")
    throw new InvalidTokenError("bad claims");
  return {
    userId: payload.sub,
    tenantId: typeof payload.tid === "string" ? payload.tid : null,
    sessionId: payload.sid,
    roles: strings(payload.roles),
    platformRoles: strings(payload.proles),
    passwordChangeRequired: payload.pwc === true,
    amr: strings(payload.amr),
    authTime: typeof payload.auth_time === "number" ? payload.auth_time : (payload.iat ?? 0),
    ...(actorOf(payload.act) ? { impersonatorId: actorOf(payload.act) } : {}),
  };
}

/** The `sub` of an `act` claim (RFC 8693 §4.1), or undefined. */
function actorOf(act: unknown): string | undefined {
  if (act === null || typeof act !== "object") return undefined;
  const sub = (act as { sub?: unknown }).sub;
  return typeof sub === "string" ? sub : undefined;
}

/** Checks a token against the verification set (see `createTokenService`), remembering good ones. */
function accessTokenVerifier(input: {
  verifiers: Map<string, CryptoKey>;
  issuer: string;
  audience: string;
  clock: Clock;
  accessTokenSeconds: number;
  cutOffSeconds: number;
}): {
  verify: (token: string) => Promise<AccessClaims>;
  remembered: (token: string) => AccessClaims | undefined;
} {
  const { verifiers, issuer, audience, clock, accessTokenSeconds, cutOffSeconds } = input;
  // A verified token's claims, until it expires (VerifiedTokens: keyed by signature, bounded)
  const verified = new VerifiedTokens<AccessClaims>(VERIFIED_TOKENS_MAX);
  const remembered = (token: string) => verified.get(token, epochMs(clock) / 1000);
  const verify = async (token: string): Promise<AccessClaims> => {
    const nowSeconds = epochMs(clock) / 1000;
    const hit = verified.get(token, nowSeconds);
    if (hit) return hit;
    let payload: JWTPayload;
    let legacy: boolean;
    try {
      const header = decodeProtectedHeader(token);
      if (header.alg !== ALG || typeof header.kid !== "string" || !verifiers.has(header.kid)) {
        throw new InvalidTokenError("unknown key or algorithm");
      }
      // compared as media types are: case-insensitively, the "application/" prefix optional
      const typ =
        typeof header.typ === "string" ? header.typ.toLowerCase().replace(/^application\//, "") : "";
      legacy = typ === LEGACY_TYP.toLowerCase();
      if (typ !== ACCESS_TOKEN_TYP && !legacy) throw new InvalidTokenError("not an access token (typ)");
      const key = verifiers.get(header.kid) as CryptoKey;
      ({ payload } = await jwtVerify(token, key, {
        algorithms: [ALG],
        issuer,
        audience,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: clock.now(),
        requiredClaims: ["sub", "exp", "iat", "sid"],
      }));
    } catch (error) {
      // jose's own errors and anything a malformed token throws are all just "invalid"
      if (error instanceof InvalidTokenError) throw error;
      throw new InvalidTokenError(error instanceof errors.JOSEError ? error.code : "invalid token");
    }
    if (legacy && !legacyTypAccepted(payload, cutOffSeconds, accessTokenSeconds, nowSeconds)) {
      throw new InvalidTokenError("a JWT-typed token issued after the at+jwt upgrade, or too old");
    }
    const claims = claimsOf(payload);
    // only tokens already valid (nbf passed) are remembered; a future-dated one is checked again
    const { exp, nbf } = payload;
    if (typeof exp === "number" && (typeof nbf !== "number" || nbf <= nowSeconds)) {
      // a JWT-typed token is remembered no longer than one lifetime from its issue
      const until = legacy ? Math.min(exp, (payload.iat as number) + accessTokenSeconds) : exp;
      verified.set(token, claims, until + CLOCK_TOLERANCE_SECONDS);
    }
    return claims;
  };
  return { verify, remembered };
}

/**
 * RS256 access tokens typed `at+jwt` (RFC 9068): signed with the current key, verified against
 * every key of the verification set (so keys rotate without logging anyone out). Verification pins
 * the algorithm, the `typ`, issuer and audience, resolves the key only by `kid` from our own set
 * (`jku`, `x5u` and embedded `jwk` headers are never used), and checks exp/nbf with a small
 * tolerance.
 */
export async function createTokenService(
  config: AppConfig,
  clock: Clock,
  logger: Logger,
): Promise<TokenService> {
  const jwt = config.settings.Security.Jwt;
  let material: SigningMaterial;
  if (!jwt.PrivateKey && config.environment !== "Production")
    material = developmentMaterial(logger, config.environment);
  else {
    const { ring, problems } = parseJwtKeys(jwt);
    if (!ring)
      throw new Error(
        `Security:Jwt is not usable: ${problems.map((p) => `${p.key} ${p.problem}`).join("; ")}`,
      );
    material = ring;
  }
  const issuer = jwt.Issuer ?? "plinth-development";
  const audience = jwt.Audience ?? "plinth-api";
  const accessTokenSeconds = jwt.AccessTokenMinutes * 60;
  const legacyTypCutOff = clock.now();
  const cutOffSeconds = Math.floor(legacyTypCutOff.getTime() / 1000);
  const { signingKey, verifiers, published } = await importKeys(material);
  const verifier = accessTokenVerifier({
    verifiers,
    issuer,
    audience,
    clock,
    accessTokenSeconds,
    cutOffSeconds,
  });

  return {
    currentKeyId: material.currentKeyId,
    accessTokenSeconds,
    legacyTypCutOff,
    issueAccessToken: async (claims) => {
      const now = Math.floor(clock.now().getTime() / 1000);
      return new SignJWT({
        tid: claims.tenantId ?? undefined,
        sid: claims.sessionId,
        roles: claims.roles,
        proles: claims.platformRoles.length ? claims.platformRoles : undefined,
        pwc: claims.passwordChangeRequired || undefined,
        act: claims.impersonatorId ? { sub: claims.impersonatorId } : undefined,
        amr: claims.amr,
        auth_time: claims.authTime,
        acr: claims.amr.includes("mfa") ? MFA_ACR : undefined,
      })
        .setProtectedHeader({ alg: ALG, kid: material.currentKeyId, typ: ACCESS_TOKEN_TYP })
        .setSubject(claims.userId)
        .setIssuer(issuer)
        .setAudience(audience)
        .setIssuedAt(now)
        .setNotBefore(now)
        .setExpirationTime(now + accessTokenSeconds)
        .setJti(crypto.randomUUID())
        .sign(signingKey);
    },
    verifyAccessToken: verifier.verify,
    rememberedAccessToken: verifier.remembered,
    jwks: () => ({ keys: published }),
  };
}
