/**
 * The second argument of every domain function, `(deps, ctx, input)`: on whose behalf and in which
 * tenant the call runs. Transports build it (HTTP: `ctxOf(c)` in src/http/request-context.ts; loops and
 * CLIs: `systemCtx`), domain code reads it and never looks at a request.
 */

/**
 * Who acts: a signed-in user, a tenant API key, a caller not (yet) signed in (sign-in, refresh, webhooks from a
 * provider), or Plinth itself (a loop, the migrator, a command).
 */
export type Actor =
  | {
      type: "user";
      userId: string;
      sessionId: string;
      /** Tenant roles (`owner`, `admin`, `member`) in the ctx's tenant. */
      roles: readonly string[];
      /** Platform roles (`platform_admin`). */
      platformRoles: readonly string[];
      /** An impersonated session: the platform admin acting as this user (audited with every action). */
      impersonatorId?: string;
    }
  | {
      /** A tenant API key (docs/api-keys.md): it acts for its tenant, within its scopes. */
      type: "apiKey";
      keyId: string;
      scopes: readonly string[];
    }
  | { type: "anonymous" }
  | { type: "system"; name: string };

export interface Ctx {
  /** The tenant acted in; null for platform-wide work. */
  tenantId: string | null;
  /**
   * The open transaction the call runs in, when a caller already holds one (an operation called
   * by another inside its transaction); operations reach the database only through
   * `withTransaction` / `withDatabase` (src/db/operation.ts), which use it.
   */
  tx?: import("./db/client.ts").Tx;
  actor: Actor;
  /** The request behind the call, where there is one (logs, audit). */
  requestId?: string;
  /** An `X-Request-Id` a client chose, kept apart from `requestId` (audit details `clientRequestId`). */
  clientRequestId?: string;
  clientIp?: string;
  /** The caller's `User-Agent` (at most 512 characters), where there is a request (audit). */
  userAgent?: string;
  /**
   * The sealed trusted-device cookie the request carried, where a sign-in may use it to skip the
   * second-factor step (src/auth/trusted-devices.ts); never logged or audited.
   */
  trustedDeviceCookie?: string;
}

/** A ctx that acts inside one tenant. */
export interface TenantCtx extends Ctx {
  tenantId: string;
}

/** The ctx of work Plinth does on its own (a loop tick, a command), optionally in one tenant. */
export function systemCtx(name: string, tenantId: string): TenantCtx;
export function systemCtx(name: string, tenantId?: string): Ctx;
export function systemCtx(name: string, tenantId: string | null = null): Ctx {
  return { tenantId, actor: { type: "system", name } };
}

/** The acting user's id, or null when Plinth itself acts. */
export const actorUserId = (ctx: Ctx): string | null => (ctx.actor.type === "user" ? ctx.actor.userId : null);
