import { and, eq, isNull, type SQL } from "drizzle-orm";
import { systemCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import { sessions, tenantMemberships, tenants, users } from "../db/schema/index.ts";
import type { AuthDeps } from "./deps.ts";
import type { SessionEntry } from "./session-cache.ts";
import { type AccessClaims, InvalidTokenError } from "./tokens.ts";
import { type Identity, identityColumns, identityOf, membershipOf } from "./user-identity.ts";

/** A session still open, with its user's identity as loaded with it (at most SessionCacheSeconds old). */
export interface OpenSession {
  sessionId: string;
  identity: Identity;
  kind: "token" | "browser";
  csrfHash: string | null;
  /** An impersonation: the platform admin acting as the user. */
  impersonatorId: string | null;
}

/** Why a credential does not open a session: the detail of the 401 the caller answers. */
export interface Refusal {
  refused: string;
}

/**
 * The session behind a request and its user's identity in the session's tenant (its role there), in
 * one query; null when it has ended or its user is no longer an Active member there.
 */
async function openSession(db: Executor, where: SQL, now: Date): Promise<SessionEntry | null> {
  const [row] = await db
    .select({
      ...identityColumns,
      sessionId: sessions.id,
      kind: sessions.kind,
      csrfHash: sessions.csrfHash,
      expiresAt: sessions.expiresAt,
      impersonatorId: sessions.impersonatorId,
    })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .leftJoin(tenants, eq(tenants.id, sessions.tenantId))
    .leftJoin(tenantMemberships, membershipOf(sessions.tenantId))
    .where(and(where, isNull(sessions.revokedAt)))
    .limit(1);
  if (!row || row.expiresAt <= now) return null;
  const identity = identityOf(row);
  if (identity.status !== "Active") return null;
  const value: OpenSession = {
    sessionId: row.sessionId,
    identity,
    kind: row.kind,
    csrfHash: row.csrfHash,
    impersonatorId: row.impersonatorId,
  };
  return {
    sessionId: row.sessionId,
    userId: identity.userId,
    tenantId: identity.tenantId,
    expiresAt: row.expiresAt,
    value,
  };
}

/**
 * Who looks a session up: a platform lookup (the request's tenant is not known before its session is,
 * and the session row names it), by the session's id from a verified token or its cookie's hash.
 */
const SESSION_LOOKUP = systemCtx("session lookup");

/** An open session through the session cache: most requests cost no database round trip. */
export async function cachedSession(
  deps: Pick<AuthDeps, "database" | "sessionCache" | "clock">,
  key: string,
  /** Only built on a miss: most requests are answered from the cache. */
  where: () => SQL,
): Promise<OpenSession | null> {
  const hit = deps.sessionCache.get(key);
  if (hit) return hit.value as OpenSession;
  const entry = await withPlatformDatabase(deps, SESSION_LOOKUP, (db) =>
    openSession(db, where(), deps.clock.now()),
  );
  if (!entry) return null;
  deps.sessionCache.set(key, entry);
  return entry.value as OpenSession;
}

/**
 * The open token session an access token speaks for. The session must still be open and the
 * token's user's, so logout and disabling a user take effect at once.
 */
export async function openTokenSession(deps: AuthDeps, accessToken: string): Promise<OpenSession | Refusal> {
  let claims: Awaited<ReturnType<typeof deps.tokens.verifyAccessToken>>;
  try {
    claims = await deps.tokens.verifyAccessToken(accessToken);
  } catch (error) {
    if (error instanceof InvalidTokenError) return { refused: "Invalid or expired token." };
    throw error;
  }
  const session = await cachedSession(deps, `s:${claims.sessionId}`, () => eq(sessions.id, claims.sessionId));
  return tokenSessionOf(claims, session);
}

/**
 * `openTokenSession` answered from this process's memory alone, without an await: a token it has
 * verified (not expired) whose session is in the session cache; undefined when it must look further
 * (then `openTokenSession` decides, as it would have).
 */
export function rememberedTokenSession(
  deps: AuthDeps,
  accessToken: string,
): OpenSession | Refusal | undefined {
  const claims = deps.tokens.rememberedAccessToken(accessToken);
  if (claims === undefined) return undefined;
  const hit = deps.sessionCache.get(`s:${claims.sessionId}`);
  if (hit === undefined) return undefined;
  return tokenSessionOf(claims, hit.value as OpenSession);
}

/** The session a token's claims speak for: open, the token's user's, a token session. */
function tokenSessionOf(claims: AccessClaims, session: OpenSession | null): OpenSession | Refusal {
  if (!session || session.identity.userId !== claims.userId || session.kind !== "token") {
    return { refused: "The session has ended." };
  }
  return session;
}
