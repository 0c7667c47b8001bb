import type { AuthDeps } from "../auth/deps.ts";
import { type OpenSession, rememberedTokenSession } from "../auth/session-lookup.ts";
import type { Identity } from "../auth/user-identity.ts";
import { type Membership, rememberedMemberships } from "../identity/memberships.ts";
import type { RateOutcome } from "../security/counter-store.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { TrustedProxies } from "./client-ip.ts";
import { admission } from "./middleware/authenticate.ts";
import { callerBucket, type RateLimiter } from "./middleware/rate-limit.ts";
import { elapsedMs, HSTS_HEADER, overHttps, requestIdOf, SECURITY_HEADERS } from "./middleware/request.ts";
import { TENANT_CODE_HEADER, type tenancyResolver } from "./middleware/tenancy.ts";
import type { Principal } from "./request-context.ts";
import { meOf } from "./routes/auth.ts";

/** The path the fast lane serves (GET only). */
export const FAST_LANE_ME_PATH = "/api/auth/me";

/** What Bun's router hands a route: the server, for the socket peer and its scheme. */
export interface ServerOfRequest {
  readonly protocol: string | null;
  requestIP(req: Request): { address: string } | null;
}

/**
 * A request the edge finishes itself, or undefined: the app must answer it (`bunServeOptions` then
 * hands it to the app, untouched: nothing has been counted or logged for it).
 */
export type FastLane = (
  req: Request,
  server: ServerOfRequest,
) => Response | Promise<Response | undefined> | undefined;

interface Caller {
  /** The session cache's entry the caller was read from (the same object while it is cached). */
  session: object;
  identity: Identity;
  principal: Principal;
  memberships: Membership[];
  /** The global limit's bucket for this caller, as the app's limit picks it (`byCaller`). */
  bucket: string;
}

/** The callers of bearer tokens as this process remembers them, and `/me`'s body for each. */
function rememberedCallers(deps: AuthDeps) {
  // admission of GET /me on the platform host depends on the session's entry alone (its identity
  // and impersonator), which the cache hands out unchanged while it holds it: decided once per entry
  const admitted = new WeakMap<object, Principal | null>();
  const admit = (found: OpenSession): Principal | null => {
    let principal = admitted.get(found);
    if (principal === undefined) {
      try {
        principal = admission(found, undefined, "GET", FAST_LANE_ME_PATH);
      } catch {
        principal = null;
      }
      admitted.set(found, principal);
    }
    return principal;
  };
  /** The caller of a bearer token, from what this process remembers; undefined: the app must look. */
  const remembered = (token: string): Caller | undefined => {
    const found = rememberedTokenSession(deps, token);
    if (found === undefined || "refused" in found) return undefined;
    const principal = admit(found);
    if (principal === null) return undefined;
    const memberships = rememberedMemberships(deps, found.identity.userId);
    if (memberships === undefined) return undefined;
    return { session: found, identity: found.identity, principal, memberships, bucket: callerBucket(found) };
  };
  // /me's body depends on the session's entry (identity, impersonator) and the memberships alone:
  // serialised once per pair, while the cache hands out the same objects (a change replaces them)
  const bodies = new WeakMap<object, { memberships: Membership[]; body: string }>();
  const bodyOf = (who: Caller): string => {
    const known = bodies.get(who.session);
    if (known !== undefined && known.memberships === who.memberships) return known.body;
    const body = JSON.stringify(meOf(who.identity, who.principal, who.memberships));
    bodies.set(who.session, { memberships: who.memberships, body });
    return body;
  };
  return { remembered, bodyOf };
}

/**
 * `GET /api/auth/me` answered outside Hono's compose, for the common case the edge can finish from
 * what this process remembers (docs/decisions.md, "A fast lane for the authenticated GET"): a bearer
 * token this process verified, its session and the caller's memberships in the session cache, the
 * platform host without a tenant code, and the global limit's admission (from its lease, else
 * from the store, asked as the middleware asks it). Every decision is the middleware's own function
 * (`requestIdOf`, the global `RateLimiter`, `tenancyResolver`, `bearerToken`,
 * `rememberedTokenSession`, `admission`, `rememberedMemberships`, `meOf`, the same headers and log
 * line), so the answer is the app's, byte for byte but the request id
 * (tests/integration/fast-lane.test.ts). Anything else — another form of credentials, a query or
 * a `%` in the URL, a body, a tenant code, another host, a miss in any cache, a check that would
 * refuse — is declined before anything is counted, and the app answers it as it always did; so is
 * the limit's refusal (a refused request takes no permit: the app's own ask refuses it alike).
 *
 * Off with telemetry (the request gets the app's span and metric) and with CORS configured (the
 * CORS headers are Hono's cors middleware's), as `createApp` decides.
 */
export function fastLane(parts: {
  deps: AuthDeps;
  logger: Logger;
  trusted: TrustedProxies;
  global: RateLimiter;
  tenancy: ReturnType<typeof tenancyResolver>;
}): FastLane {
  const { deps, logger, trusted, global, tenancy } = parts;
  // One header set per scheme, its RateLimit and X-Request-Id set per answer (as `nativeLiveness`
  // does): the Response copies them when it is made, cheaper in Bun than a list or an object each
  // time. Names and values are the app's for /me: its content type, the global limit's policy,
  // no-store for an answer to credentials, the security headers (and HSTS over HTTPS).
  const plain = new Headers([
    ["content-type", "application/json"],
    ["ratelimit-policy", global.policyHeader],
    ["ratelimit", ""],
    ["cache-control", "no-store"],
    ...SECURITY_HEADERS,
    ["x-request-id", ""],
  ]);
  const secure = new Headers([...plain, [...HSTS_HEADER]]);
  const { remembered, bodyOf } = rememberedCallers(deps);
  return (req, server) => {
    const started = performance.now();
    const url = req.url;
    // no Host (a path-only URL), a query (a tenant code, input to guard), a percent-encoded path
    if (url.charCodeAt(0) === 47 || url.includes("?") || url.includes("%")) return undefined;
    const headers = req.headers;
    const authorization = headers.get("authorization");
    if (authorization === null || !authorization.startsWith("Bearer ")) return undefined;
    if (headers.has(TENANT_CODE_HEADER) || headers.has("content-length") || headers.has("transfer-encoding"))
      return undefined;
    // the token as `bearerToken` reads the usual form, without its whitespace scan over ~800
    // characters: only a token this process verified is looked up exactly (`remembered`), and a
    // verified compact token holds no whitespace, so anything else is a miss the app answers
    const token = authorization.slice(7);
    // the socket peer is a system call: asked once, and only if something needs it
    let peerRead = false;
    let peerAddress: string | undefined;
    const peer = () => {
      if (!peerRead) {
        peerAddress = server.requestIP(req)?.address;
        peerRead = true;
      }
      return peerAddress;
    };
    const host = tenancy.hostOfRequest(headers, url, peer);
    if (host === null || !tenancy.isPlatformHost(host)) return undefined;
    const caller = remembered(token);
    if (caller === undefined) return undefined;
    const answer = (outcome: RateOutcome | null, who: Caller) => {
      const id = requestIdOf(headers.get("x-request-id"), peer, trusted);
      const body = bodyOf(who);
      const https = overHttps(server.protocol === "https", headers, peer, trusted);
      let set: Headers;
      if (outcome === null) {
        // the store unreachable and the global limit open: let through without RateLimit, as the app does
        set = new Headers(https ? secure : plain);
        set.delete("ratelimit");
        set.delete("ratelimit-policy");
      } else {
        set = https ? secure : plain;
        set.set("ratelimit", global.stateHeader(outcome));
      }
      set.set("x-request-id", id.requestId);
      const response = new Response(body, { status: 200, headers: set });
      logger.request({
        method: "GET",
        path: FAST_LANE_ME_PATH,
        status: 200,
        durationMs: elapsedMs(started),
        requestId: id.requestId,
        clientRequestId: id.clientRequestId,
      });
      return response;
    };
    // the caller's own budget (`byCaller`): a remembered session counts against its person, so no
    // socket peer is read for it (a system call) unless a trusted proxy's headers need one.
    // A permit from the lease: answered at once (most requests of a busy client)
    const leased = global.leased(caller.bucket);
    if (leased !== undefined) return answer(leased, caller);
    // else the store decides, as the app's limit would ask it (the same call, coalesced per turn,
    // the lease kept from it). A refusal goes to the app, which asks again and gets the same
    // refusal (a refused request takes no permit) and answers the 429; so does a store that
    // rejects. The caller is looked up again after the wait, as the app authenticates after its
    // limit: a session that ended meanwhile goes to the app (which counts the request again:
    // stricter by one permit in that race, never looser)
    return global.decided(caller.bucket).then(
      (outcome) => {
        if (outcome !== null && !outcome.allowed) return undefined;
        const still = remembered(token);
        return still === undefined ? undefined : answer(outcome, still);
      },
      () => undefined,
    );
  };
}
