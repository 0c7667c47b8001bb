import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { acceptInvitation } from "../../identity/accept-invitation.ts";
import { createInvitation } from "../../identity/create-invitation.ts";
import { listInvitations } from "../../identity/list-invitations.ts";
import { resendInvitation } from "../../identity/resend-invitation.ts";
import { revokeInvitation } from "../../identity/revoke-invitation.ts";
import { tenantRoles } from "../../identity/roles.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, pageQuery, problem } from "../openapi.ts";
import { anonymousCtxOf, createRouter, tenantCtxOf } from "../request-context.ts";
import { signInResult } from "./auth.ts";
import { INVITATIONS_ACTIONS } from "./invitations-actions.ts";

const newInvitation = z
  .object({
    email: z.email().max(320),
    role: z.enum(tenantRoles).default("member"),
  })
  .openapi("NewInvitation");
const createdInvitation = z
  .object({ id: z.uuid(), email: z.string(), role: z.string(), expiresAt: z.string() })
  .openapi("CreatedInvitation");
const invitation = z
  .object({
    id: z.uuid(),
    email: z.string(),
    role: z.string(),
    status: z.enum(["pending", "accepted", "revoked", "expired"]),
    expiresAt: z.string(),
    invitedBy: z
      .uuid()
      .nullable()
      .openapi({ description: "The user who invited; null for an operator or once removed." }),
    createdAt: z.string(),
  })
  .openapi("Invitation");
const invitationIdParam = z.object({ invitationId: z.uuid() });

// people are invited by people: no API key manages invitations
const manage = tenantAccess(["owner", "admin"], { apiKey: "none" });

const create = apiRoute(
  manage,
  {
    method: "post",
    path: "/api/tenant/invitations",
    operationId: "createInvitation",
    tags: ["tenant"],
    summary: "Invite an address into the caller's tenant with a role; the link is mailed to it.",
    request: { body: jsonBody(newInvitation) },
    responses: {
      201: json("Invited; the link is on its way.", createdInvitation),
      402: problem("`payment_required`: the plan has no seats."),
      403: problem(
        "`forbidden`: only an owner invites an owner; `usage_limit_reached`: every seat (members and pending invitations) is taken.",
      ),
      409: problem("The address is a member already, or has a pending invitation (resend it)."),
    },
  },
  { location: true },
);
const list = apiRoute(manage, {
  method: "get",
  path: "/api/tenant/invitations",
  operationId: "listInvitations",
  tags: ["tenant"],
  summary: "The caller's tenant's invitations in creation order, a page at a time.",
  request: { query: z.object(pageQuery) },
  responses: {
    200: json(
      "A page of invitations; pass `nextCursor` as `cursor` for the next one (null on the last page).",
      z.object({ items: z.array(invitation), nextCursor: z.string().nullable() }).openapi("InvitationList"),
    ),
    400: problem("The limit or the cursor is not valid."),
  },
});
const revoke = apiRoute(manage, {
  method: "delete",
  path: "/api/tenant/invitations/{invitationId}",
  operationId: "revokeInvitation",
  tags: ["tenant"],
  summary: "Revoke an invitation: its link stops working and its seat is free.",
  request: { params: invitationIdParam },
  responses: {
    204: { description: "Revoked (or revoked already)." },
    404: problem("No such invitation in this tenant."),
    409: problem("The invitation was accepted."),
  },
});
const resend = apiRoute(manage, {
  method: "post",
  path: "/api/tenant/invitations/{invitationId}/resend",
  operationId: "resendInvitation",
  tags: ["tenant"],
  summary: "Mail a pending invitation again with a new link (the old one stops working) and a new expiry.",
  request: { params: invitationIdParam },
  responses: {
    200: json("Sent again.", invitation),
    402: problem("`payment_required`: the plan has no seats (an expired invitation takes one again)."),
    403: problem("`usage_limit_reached`: every seat is taken."),
    404: problem("No such invitation in this tenant."),
    409: problem("The invitation was accepted or revoked."),
  },
});
const accept = apiRoute("public", {
  method: "post",
  path: "/api/auth/invitations/accept",
  operationId: "acceptInvitation",
  tags: ["auth"],
  summary: "Accept an invitation with its link's token: a token pair in the tenant.",
  description:
    "The address's existing shared sign-in joins the tenant (name and password are not needed); any " +
    "other address gets a new account with `name` and `password`. A link that is unknown, expired, " +
    "revoked or used is 404, the same answer for each. The link proves the address, not the person: an " +
    "identity with a second factor (or one the tenant's policy makes enrol) gets the `mfaRequired` step " +
    "instead of tokens, completed at POST /api/auth/mfa/verify; the membership is made either way.",
  request: {
    body: jsonBody(
      z
        .object({
          token: z.string().min(1).max(512),
          name: z.string().trim().min(1).max(200).optional(),
          password: z.string().min(1).max(1024).optional(),
        })
        .openapi("InvitationAcceptance"),
    ),
  },
  responses: {
    200: json("Joined and signed in, or joined and the second-factor step.", signInResult),
    400: problem("A new account needs `name` and a strong enough `password`."),
    404: problem("The link is not valid (expired, revoked or used)."),
    409: problem("Already a member of the tenant."),
  },
});

/** Owners and admins invite people into their tenant; the invitee accepts with the mailed link. */
export function invitationRoutes(deps: Deps) {
  return createRouter()
    .openapi(create, async (c) => {
      const view = await createInvitation(deps, tenantCtxOf(c), c.req.valid("json"));
      const { id, email, role, expiresAt } = view;
      return c.json({ id, email, role, expiresAt }, 201, { location: `/api/tenant/invitations/${id}` });
    })
    .openapi(list, async (c) =>
      c.json(await listInvitations(deps, tenantCtxOf(c), c.req.valid("query")), 200),
    )
    .openapi(revoke, async (c) => {
      await revokeInvitation(deps, tenantCtxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    })
    .openapi(resend, async (c) =>
      c.json(await resendInvitation(deps, tenantCtxOf(c), c.req.valid("param")), 200),
    )
    .openapi(accept, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await acceptInvitation(deps, anonymousCtxOf(c), c.req.valid("json")), 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const invitationsArea = defineArea({
  name: "invitations",
  routes: [invitationRoutes],
  auditActions: INVITATIONS_ACTIONS,
});
