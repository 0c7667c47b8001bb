import { and, eq, isNull, type SQL } from "drizzle-orm";
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { normaliseOrigin } from "../../auth/origins.ts";
import { opaqueToken, safeEqual, tokenHash } from "../../auth/secrets.ts";
import {
  type AuthDeps,
  type Identity,
  identityColumns,
  identityOf,
  insertSessionIfUnchanged,
  type SignIn,
} from "../../auth/service.ts";
import type { SessionEntry } from "../../auth/session-cache.ts";
import { InvalidTokenError } from "../../auth/tokens.ts";
import type { Db } from "../../db/client.ts";
import { sessions, tenants, users } from "../../db/schema/index.ts";
import { AppError } from "../../errors.ts";
import { type AppEnv, type Principal, unauthorized } from "../context.ts";

export const SESSION_COOKIE = "__Host-plinth_session";
export const CSRF_HEADER = "x-csrf-token";
/** Data-protection purpose of the session cookie: a cookie of another application does not open. */
const COOKIE_PURPOSE = "browser-session";
/** The one route a token that must change its password may use. */
export const PASSWORD_CHANGE_PATH = "/api/auth/password";
/** What a user who must change the password may still do: change it, or sign out of the browser. */
const ALLOWED_BEFORE_CHANGE = new Set([PASSWORD_CHANGE_PATH, "/api/auth/browser/logout"]);

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** The session behind a request and its user's identity, in one query; null when it has ended. */
async function openSession(db: Db, where: SQL, now: Date): Promise<SessionEntry | null> {
  const [row] = await db
    .select({
      ...identityColumns,
      sessionId: sessions.id,
      kind: sessions.kind,
      csrfHash: sessions.csrfHash,
      expiresAt: sessions.expiresAt,
    })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .leftJoin(tenants, eq(tenants.id, users.tenantId))
    .where(and(where, isNull(sessions.revokedAt)))
    .limit(1);
  if (!row || row.expiresAt <= now) return null;
  const identity = identityOf(row);
  if (identity.status !== "Active") return null;
  const value: OpenSession = { sessionId: row.sessionId, identity, kind: row.kind, csrfHash: row.csrfHash };
  return {
    sessionId: row.sessionId,
    userId: identity.userId,
    tenantId: identity.tenantId,
    expiresAt: row.expiresAt,
    value,
  };
}

interface OpenSession {
  sessionId: string;
  identity: Identity;
  kind: "token" | "browser";
  csrfHash: string | null;
}

async function cachedSession(
  deps: AuthDeps,
  key: string,
  /** Only built on a miss: most requests are answered from the cache. */
  where: () => SQL,
  now: Date,
): Promise<OpenSession | null> {
  const hit = deps.sessionCache.get(key);
  if (hit) return hit.value as OpenSession;
  const entry = await openSession(deps.database.db, where(), now);
  if (!entry) return null;
  deps.sessionCache.set(key, entry);
  return entry.value as OpenSession;
}

/**
 * Authenticates a request from `Authorization: Bearer <access token>` or, for browsers, the
 * session cookie (only from `BrowserAuth:AllowedOrigins`, and with the CSRF header on
 * state-changing requests). The session behind either must still be open, so logout and
 * disabling a user take effect at once. A token of another tenant than the request's host gets
 * 404: on tenant B's host, tenant A's users find nothing.
 */
export function authenticate(deps: AuthDeps): MiddlewareHandler<AppEnv> {
  const allowedOrigins = new Set(deps.config.settings.BrowserAuth.AllowedOrigins.map(normaliseOrigin));
  return async (c, next) => {
    const now = deps.clock.now();
    const header = c.req.header("authorization");
    let identity: Identity;
    let sessionId: string;
    if (header !== undefined) {
      const match = /^Bearer\s+(\S+)$/i.exec(header);
      if (!match?.[1]) throw unauthorized("Malformed Authorization header.");
      let claims: Awaited<ReturnType<typeof deps.tokens.verifyAccessToken>>;
      try {
        claims = await deps.tokens.verifyAccessToken(match[1]);
      } catch (error) {
        if (error instanceof InvalidTokenError) throw unauthorized("Invalid or expired token.");
        throw error;
      }
      const session = await cachedSession(
        deps,
        `s:${claims.sessionId}`,
        () => eq(sessions.id, claims.sessionId),
        now,
      );
      if (!session || session.identity.userId !== claims.userId || session.kind !== "token") {
        throw unauthorized("The session has ended.");
      }
      identity = session.identity;
      sessionId = claims.sessionId;
    } else {
      const cookie = getCookie(c, SESSION_COOKIE);
      if (!cookie) throw unauthorized();
      const origin = c.req.header("origin");
      if (origin !== undefined && !allowedOrigins.has(normaliseOrigin(origin))) {
        throw new AppError("forbidden", "This origin may not use browser authentication.");
      }
      const opened = await deps.dataProtection
        .forPurpose(COOKIE_PURPOSE)
        .unprotect(cookie)
        .catch(() => null);
      if (!opened) throw unauthorized("The session cookie is not valid here.");
      const cookieHash = tokenHash(opened);
      const session = await cachedSession(
        deps,
        `c:${cookieHash}`,
        () => eq(sessions.cookieHash, cookieHash),
        now,
      );
      if (session?.kind !== "browser") throw unauthorized("The session has ended.");
      if (!SAFE_METHODS.has(c.req.method)) {
        const csrf = c.req.header(CSRF_HEADER);
        if (!csrf || !session.csrfHash || !safeEqual(tokenHash(csrf), session.csrfHash)) {
          throw new AppError("forbidden", "Missing or wrong CSRF token.");
        }
      }
      identity = session.identity;
      sessionId = session.sessionId;
    }
    // roles and flags come from the database (at most SessionCacheSeconds old), not from the token
    const principal: Principal = {
      userId: identity.userId,
      tenantId: identity.tenantId,
      roles: identity.roles,
      platformRoles: identity.platformRoles,
      sessionId,
    };
    const passwordChangeRequired = identity.mustChangePassword;
    const tenant = c.get("tenant");
    if (tenant && principal.tenantId !== tenant.id) throw new AppError("not_found", "No such resource.");
    if (passwordChangeRequired && !(c.req.method === "POST" && ALLOWED_BEFORE_CHANGE.has(c.req.path))) {
      throw new AppError("password_change_required", "Change your password first (POST /api/auth/password).");
    }
    c.set("principal", principal);
    c.set("identity", identity);
    await next();
  };
}

/**
 * Opens a browser session: an HttpOnly `__Host-` cookie plus a CSRF token for the page to send back.
 * Like a token session, it is only opened while the user row is as the sign-in verified it.
 */
export async function startBrowserSession(
  deps: AuthDeps,
  c: Context<AppEnv>,
  signIn: SignIn,
): Promise<{ csrfToken: string; expiresIn: number }> {
  const now = deps.clock.now();
  const seconds = deps.config.settings.BrowserAuth.SessionHours * 3600;
  const cookie = opaqueToken();
  const csrfToken = opaqueToken();
  // one transaction: the user row stays share-locked until the session row is committed
  await deps.database.db.transaction((tx) =>
    insertSessionIfUnchanged(tx, signIn, {
      kind: "browser",
      cookieHash: tokenHash(cookie),
      csrfHash: tokenHash(csrfToken),
      createdAt: now,
      lastUsedAt: now,
      expiresAt: new Date(now.getTime() + seconds * 1000),
    }),
  );
  setCookie(c, SESSION_COOKIE, await deps.dataProtection.forPurpose(COOKIE_PURPOSE).protect(cookie), {
    path: "/",
    httpOnly: true,
    secure: true,
    sameSite: deps.config.settings.BrowserAuth.SameSite,
    maxAge: seconds,
  });
  return { csrfToken, expiresIn: seconds };
}

export function clearBrowserSession(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { path: "/", secure: true });
}
