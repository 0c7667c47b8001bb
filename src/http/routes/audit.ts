import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import {
  type AuditEventView,
  type AuditFilter,
  exportAuditEvents,
  listAuditEvents,
  listTenantAuditEvents,
} from "../../audit/read.ts";
import type { Ctx } from "../../context.ts";
import type { Deps } from "../../deps.ts";
import { describeError } from "../../redact.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { STAFF_ROLES } from "../console/layout.ts";
import { auditPages } from "../console/pages-audit.ts";
import { apiRoute, pageQuery, problem } from "../openapi.ts";
import { type AppEnv, createRouter, ctxOf, tenantCtxOf } from "../request-context.ts";
import { AUDIT_ACTIONS } from "./audit-actions.ts";

export const NDJSON = "application/x-ndjson";

const auditEvent = z
  .object({
    id: z.string().openapi({ description: "Increasing with time across all chains." }),
    tenantId: z.string().nullable().openapi({ description: "null: a platform event." }),
    occurredAt: z.string(),
    actor: z
      .object({
        type: z.string().openapi({ description: "`user`, `apiKey`, `system` or `anonymous`." }),
        id: z.string().nullable(),
      })
      .openapi("AuditActor"),
    action: z.string().openapi({ description: "e.g. `auth.sign_in`; the list is in docs/audit.md." }),
    target: z.object({ type: z.string(), id: z.string().nullable() }).nullable().openapi("AuditTarget"),
    outcome: z.string().openapi({ description: "`success`, `failure` or `denied`." }),
    clientAddress: z.string().nullable(),
    userAgent: z.string().nullable(),
    requestId: z.string().nullable(),
    details: z.record(z.string(), z.unknown()),
    prevHash: z.string(),
    hash: z.string().openapi({ description: "SHA-256 over the row and `prevHash` (docs/audit.md)." }),
  })
  .openapi("AuditEvent");

const auditEventList = z
  .object({
    items: z.array(auditEvent),
    nextCursor: z
      .string()
      .nullable()
      .openapi({ description: "Pass as `cursor` for the next (older) page; null on the last page." }),
  })
  .openapi("AuditEventList");

const time = z.iso
  .datetime({ offset: true })
  .transform((value) => new Date(value))
  .optional();

const filters = {
  action: z.string().min(1).max(100).optional(),
  actor: z.string().min(1).max(200).optional().openapi({ description: "An actor id (user, API key)." }),
  targetType: z.string().min(1).max(100).optional(),
  targetId: z.string().min(1).max(200).optional(),
  from: time.openapi({ description: "Events at or after this time (ISO 8601)." }),
  to: time.openapi({ description: "Events before this time (ISO 8601)." }),
  ...pageQuery,
};

const answers = {
  200: {
    description:
      "A page of events, newest first (`application/json`); or, with `Accept: application/x-ndjson`, every event matching the filters, oldest first, one `AuditEvent` per line, streamed (limit and cursor ignored).",
    content: {
      "application/json": { schema: auditEventList },
      [NDJSON]: { schema: auditEvent },
    },
  },
  400: problem("A filter, the limit or the cursor is not valid."),
};

const tenantList = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "get",
  path: "/api/tenant/audit-events",
  operationId: "listTenantAuditEvents",
  tags: ["tenant"],
  summary: "The caller's tenant's audit log, filtered; NDJSON export (owners and admins).",
  request: { query: z.object(filters) },
  responses: answers,
});

const adminList = apiRoute("platform", {
  method: "get",
  path: "/api/admin/audit-events",
  operationId: "adminListAuditEvents",
  tags: ["admin"],
  summary: "Any tenant's audit log, or the platform's; NDJSON export (platform administrators).",
  request: {
    query: z.object({
      ...filters,
      tenantId: z
        .union([z.uuid(), z.literal("platform")])
        .optional()
        .openapi({ description: "A tenant's events, or `platform` for platform events; all when absent." }),
    }),
  },
  responses: answers,
});

const wantsNdjson = (c: Context<AppEnv>): boolean => (c.req.header("accept") ?? "").includes(NDJSON);

/** The NDJSON answer: one batch read per pull, so a slow reader holds back the reads. */
function ndjson(c: Context<AppEnv>, deps: Deps, ctx: Ctx, filter: AuditFilter) {
  const batches = exportAuditEvents(deps, ctx, filter);
  const encoder = new TextEncoder();
  const started = performance.now();
  let rows = 0;
  let reads = 0;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: IteratorResult<AuditEventView[]>;
      try {
        next = await batches.next();
      } catch (error) {
        // the status line is sent: the client sees the body end early; the log says why
        deps.logger.error("audit export failed", {
          requestId: ctx.requestId,
          rows,
          error: describeError(error, deps.redactor.text),
        });
        controller.error(error);
        return;
      }
      if (next.done) {
        controller.close();
        deps.logger.info("audit export streamed", {
          requestId: ctx.requestId,
          tenantId: filter.tenantId,
          rows,
          batches: reads,
          ms: Math.round(performance.now() - started),
        });
        return;
      }
      rows += next.value.length;
      reads++;
      controller.enqueue(encoder.encode(`${next.value.map((e) => JSON.stringify(e)).join("\n")}\n`));
    },
    async cancel() {
      await batches.return(undefined);
    },
  });
  // the route's typed answers are JSON only; the document declares this media type too
  return c.body(stream, 200, { "content-type": NDJSON }) as never;
}

/** `GET /api/tenant/audit-events`, behind the owner/admin guard. */
export function tenantAuditRoutes(deps: Deps) {
  return createRouter().openapi(tenantList, async (c) => {
    const { limit, cursor, ...filter } = c.req.valid("query");
    const ctx = tenantCtxOf(c);
    if (wantsNdjson(c)) return ndjson(c, deps, ctx, { ...filter, tenantId: ctx.tenantId });
    return c.json(await listTenantAuditEvents(deps, ctx, { ...filter, limit, cursor }), 200);
  });
}

/** `GET /api/admin/audit-events`, for platform staff. */
export function adminAuditRoutes(deps: Deps) {
  return createRouter().openapi(adminList, async (c) => {
    const { limit, cursor, tenantId, ...rest } = c.req.valid("query");
    const filter = { ...rest, tenantId: tenantId === "platform" ? null : tenantId };
    const ctx = ctxOf(c, null);
    if (wantsNdjson(c)) return ndjson(c, deps, ctx, filter);
    return c.json(await listAuditEvents(deps, ctx, { ...filter, limit, cursor }), 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const auditArea = defineArea({
  name: "audit",
  routes: [tenantAuditRoutes, adminAuditRoutes],
  auditActions: AUDIT_ACTIONS,
  consolePages: [{ path: "/console/audit", title: "Audit", seenBy: STAFF_ROLES, routes: auditPages }],
});
