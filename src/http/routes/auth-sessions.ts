import { z } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import {
  endMemberSessions,
  endOtherUserSessions,
  endUserSession,
  listUserSessions,
  type UserSessionDeps,
} from "../../auth/user-sessions.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { EVERYONE } from "../console/layout.ts";
import { sessionPages } from "../console/pages-sessions.ts";
import { accessOf, apiRoute, json, pageQuery, problem, routerPath } from "../openapi.ts";
import { type AppEnv, adminCtxOf, createRouter, ctxOf, tenantCtxOf } from "../request-context.ts";
import { SESSIONS_ACTIONS } from "./auth-sessions-actions.ts";

const userSession = z
  .object({
    id: z.uuid(),
    kind: z.enum(["token", "browser"]),
    createdAt: z.string(),
    lastUsedAt: z.string(),
    expiresAt: z.string(),
    client: z.string().nullable().openapi({ description: "The `User-Agent` that signed in." }),
    address: z.string().nullable().openapi({ description: "The client address that signed in." }),
    current: z.boolean().openapi({ description: "The session this request is made with." }),
    impersonatorId: z.uuid().nullable().openapi({
      description: "Set when a platform admin opened this session as the user (an impersonation).",
    }),
  })
  .openapi("UserSession");
const sessionIdParam = z.object({ sessionId: z.uuid() });
const userIdParam = z.object({ userId: z.uuid() });

const routes = {
  list: apiRoute("signedIn", {
    method: "get",
    path: "/api/auth/sessions",
    operationId: "listMySessions",
    tags: ["auth"],
    summary: "The caller's open sessions, newest first, a page at a time.",
    request: { query: z.object(pageQuery) },
    responses: {
      200: json(
        "A page of sessions; pass `nextCursor` as `cursor` for the next one (null on the last page).",
        z
          .object({ items: z.array(userSession), nextCursor: z.string().nullable() })
          .openapi("UserSessionList"),
      ),
      400: problem("The limit or the cursor is not valid."),
    },
  }),
  endOne: apiRoute("signedIn", {
    method: "delete",
    path: "/api/auth/sessions/{sessionId}",
    operationId: "endMySession",
    tags: ["auth"],
    summary: "End one of the caller's sessions; refused on every API process at once.",
    request: { params: sessionIdParam },
    responses: { 204: { description: "Ended." }, 404: problem("No open session of the caller has this id.") },
  }),
  endOthers: apiRoute("signedIn", {
    method: "delete",
    path: "/api/auth/sessions",
    operationId: "endMyOtherSessions",
    tags: ["auth"],
    summary: "End every session of the caller but the one this request uses.",
    responses: { 204: { description: "Ended." } },
  }),
};

const endMember = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "users:write" }), {
  method: "delete",
  path: "/api/tenant/users/{userId}/sessions",
  operationId: "endTenantUserSessions",
  tags: ["tenant"],
  summary: "End every session a member has in this tenant (owners, admins); at once on every API process.",
  request: { params: userIdParam },
  responses: {
    204: { description: "Ended." },
    403: problem("`forbidden`: only an owner ends an owner's sessions."),
    404: problem("No such user in this tenant."),
  },
});

const adminEndMember = apiRoute("platform", {
  method: "delete",
  path: "/api/admin/tenants/{tenantId}/users/{userId}/sessions",
  operationId: "adminEndTenantUserSessions",
  tags: ["admin"],
  summary: "End every session a tenant's user has in it (platform admins).",
  request: { params: z.object({ tenantId: z.uuid(), userId: z.uuid() }) },
  responses: { 204: { description: "Ended." }, 404: problem("No such user in this tenant.") },
});

/** A signed-in user's own sessions: list, end one, end all others. */
export function authSessionRoutes(deps: UserSessionDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const router = createRouter();
  for (const route of Object.values(routes))
    if (accessOf(route) === "signedIn") router.use(routerPath(route), authenticated);
  return router
    .openapi(routes.list, async (c) => {
      const page = await listUserSessions(deps, ctxOf(c), c.req.valid("query"));
      const iso = (d: Date) => d.toISOString();
      return c.json(
        {
          items: page.items.map((s) => ({
            ...s,
            createdAt: iso(s.createdAt),
            lastUsedAt: iso(s.lastUsedAt),
            expiresAt: iso(s.expiresAt),
          })),
          nextCursor: page.nextCursor,
        },
        200,
      );
    })
    .openapi(routes.endOne, async (c) => {
      await endUserSession(deps, ctxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    })
    .openapi(routes.endOthers, async (c) => {
      await endOtherUserSessions(deps, ctxOf(c));
      return c.body(null, 204);
    });
}

/** Owners, admins and platform admins end a member's sessions in a tenant. */
export function memberSessionRoutes(deps: UserSessionDeps) {
  return createRouter()
    .openapi(endMember, async (c) => {
      await endMemberSessions(deps, tenantCtxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    })
    .openapi(adminEndMember, async (c) => {
      const { tenantId, userId } = c.req.valid("param");
      await endMemberSessions(deps, adminCtxOf(c, tenantId), { userId });
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const sessionsArea = defineArea({
  name: "auth-sessions",
  routes: [authSessionRoutes],
  auditActions: SESSIONS_ACTIONS,
  consolePages: [{ path: "/console/sessions", title: "Sessions", seenBy: EVERYONE, routes: sessionPages }],
});

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const memberSessionsArea = defineArea({ name: "member-sessions", routes: [memberSessionRoutes] });
