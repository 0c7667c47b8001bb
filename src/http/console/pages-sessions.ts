import { Hono } from "hono";
import { html } from "hono/html";
import {
  endOtherUserSessions,
  endUserSession,
  listUserSessions,
  sessionCursor,
  type UserSessionView,
} from "../../auth/user-sessions.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../tenancy/tenants.ts";
import { ctxOf } from "../request-context.ts";
import { csrfField, type Html, layout, notice, type Viewer, when } from "./layout.ts";
import { consoleActed, consoleCursor, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

const DONE: Record<string, string> = {
  ended: "Session ended: it is refused on every API process now.",
  others: "Every other session ended.",
};

/** One session's row: when, from where, what; the current one is marked and has no end button. */
function sessionRow(viewer: Viewer, s: UserSessionView): Html {
  const end = s.current
    ? html`<span class="badge ok">this session</span>`
    : html`<form class="inline" method="post" action="/console/sessions/${s.id}/end">${csrfField(viewer)}<button type="submit" class="danger">End</button></form>`;
  return html`<tr>
<th scope="row">${when(s.createdAt)}</th>
<td data-label="Last used">${when(s.lastUsedAt)}</td>
<td data-label="Kind">${s.kind}${s.impersonatorId ? html` <span class="badge warn">impersonated</span>` : ""}</td>
<td data-label="Client">${s.client ?? html`<span class="muted">—</span>`}</td>
<td data-label="Address">${s.address ?? html`<span class="muted">—</span>`}</td>
<td data-label="Expires">${when(s.expiresAt)}</td>
<td class="actions">${end}</td>
</tr>`;
}

function sessionsBody(
  viewer: Viewer,
  items: UserSessionView[],
  next: string | null,
  done: string | undefined,
): Html {
  return html`${notice(done ? DONE[done] : undefined, "ok")}
<div class="table-wrap"><table class="stack"><thead><tr><th scope="col">Signed in</th><th scope="col">Last used</th><th scope="col">Kind</th><th scope="col">Client</th><th scope="col">Address</th><th scope="col">Expires</th><th scope="col">End</th></tr></thead>
<tbody>${items.map((s) => sessionRow(viewer, s))}</tbody></table></div>
<nav class="pager" aria-label="Pages">${next ? html`<a href="/console/sessions?cursor=${encodeURIComponent(next)}">More sessions</a>` : ""}</nav>
<form method="post" action="/console/sessions/end-others">${csrfField(viewer)}<button type="submit" class="danger">End every other session</button></form>
<p class="muted">Your open sessions, newest first: this browser's and any token or other browser signed in as you. Ending one refuses it at once on every API process.</p>`;
}

/** `/console/sessions`: the signed-in staff member's own sessions (list, end one, end all others). */
export function sessionPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/sessions", async (c) => {
    const viewer = viewerOf(c);
    const cursor = consoleCursor(sessionCursor, c.req.query("cursor"));
    const page = await listUserSessions(deps, ctxOf(c), { limit: 50, cursor });
    const done = Object.keys(DONE).find((key) => c.req.query(key) !== undefined);
    return pageResponse(
      c,
      layout({
        title: "Sessions",
        section: "/console/sessions",
        viewer,
        body: sessionsBody(viewer, page.items, page.nextCursor, done),
      }),
    );
  });

  router.post("/console/sessions/end-others", async (c) => {
    const ctx = ctxOf(c);
    const { ended } = await endOtherUserSessions(deps, ctx);
    const userId = ctx.actor.type === "user" ? ctx.actor.userId : "";
    consoleActed(deps, c, "auth.session_ended", { type: "user", id: userId }, { count: ended });
    return seeOther(c, "/console/sessions?others");
  });

  router.post("/console/sessions/:id/end", async (c) => {
    const id = c.req.param("id");
    if (!isUuid(id)) throw new AppError("not_found", "No open session of yours has this id.");
    await endUserSession(deps, ctxOf(c), { sessionId: id });
    consoleActed(deps, c, "auth.session_ended", { type: "session", id });
    return seeOther(c, "/console/sessions?ended");
  });
  return router;
}
