import { OpenAPIHono } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import { fieldErrors, ProblemError } from "./errors.ts";

/** Who is calling: set by the authentication middleware from a verified token or session cookie. */
export interface Principal {
  userId: string;
  /** null for platform staff. */
  tenantId: string | null;
  /** Tenant roles (e.g. `owner`, `member`) in `tenantId`. */
  roles: string[];
  /** Platform roles (e.g. `platform_admin`). */
  platformRoles: string[];
  sessionId: string;
}

/** The tenant a request acts in, resolved from its host or tenant-code path. */
export interface ResolvedTenant {
  id: string;
  code: string;
}

/** Per-request values set by middleware. Routes behind the auth guards can rely on `principal`. */
export type AppEnv = {
  /** What the server hands to `app.fetch(req, env)`: the socket peer (see http/client-ip.ts). */
  Bindings: {
    peerAddress?: string;
  };
  Variables: {
    requestId: string;
    /** The real client IP, or `unknown`: read it with `clientIp(c)` (http/client-ip.ts). */
    clientIp?: string;
    /** Set by the `edge` middleware for `clientIp(c)`. */
    trustedProxies?: import("./client-ip.ts").TrustedProxies;
    principal?: Principal;
    /** The caller's identity as loaded with the session (auth/middleware.ts). */
    identity?: import("../auth/service.ts").Identity;
    tenant?: ResolvedTenant;
  };
};

/** A router whose request validation fails as a 400 problem naming the fields. */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        throw new ProblemError("validation_failed", "The request is not valid.", {
          errors: fieldErrors(result.error),
        });
      }
    },
  });
}

export type Router = ReturnType<typeof createRouter>;
export type RouteModule = (deps: Deps) => Router;
