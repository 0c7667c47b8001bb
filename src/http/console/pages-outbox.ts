import { Hono } from "hono";
import { html } from "hono/html";
import type { Deps } from "../../deps.ts";
import { getEmailPreview, listEmailMessages } from "../../email/list-email-messages.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../tenancy/tenants.ts";
import { defineArea } from "../area.ts";
import { ctxOf } from "../request-context.ts";
import { badge, layout, notice, STAFF_ROLES, when } from "./layout.ts";
import { pageResponse } from "./respond.ts";
import { type ConsoleEnv, viewerOf } from "./session.ts";

/** How many messages the outbox lists (the newest). */
const MESSAGES_SHOWN = 100;

/**
 * `/console/outbox`, in Development only: the messages Plinth sent or would have sent, each one
 * whole (its link included), so the quickstart works without a mail server (docs/email.md).
 */
export function outboxPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/outbox", async (c) => {
    const viewer = viewerOf(c);
    const messages = await listEmailMessages(deps, ctxOf(c, null), { limit: MESSAGES_SHOWN });
    const body = html`${notice("Development only: messages as they were sent, or logged when no provider is configured.")}
${
  messages.length === 0
    ? html`<p class="muted">No messages yet.</p>`
    : html`<table><thead><tr><th>Created</th><th>To</th><th>Template</th><th>Tenant</th><th>Status</th><th>Provider</th></tr></thead><tbody>
${messages.map(
  (m) =>
    html`<tr><td>${when(m.createdAt)}</td><td><a href="/console/outbox/${m.id}">${m.to}</a></td><td>${m.template} (${m.locale})</td><td>${m.tenantName ?? html`<span class="muted">platform</span>`}</td><td>${badge(m.status)}</td><td>${m.provider ?? "—"}</td></tr>`,
)}
</tbody></table>`
}`;
    return pageResponse(c, layout({ title: "Outbox", section: "/console/outbox", viewer, body }));
  });

  router.get("/console/outbox/:id", async (c) => {
    const viewer = viewerOf(c);
    const id = c.req.param("id");
    if (!isUuid(id)) throw new AppError("not_found", "No such message.");
    const m = await getEmailPreview(deps, ctxOf(c, null), { id });
    const body = html`<dl>
<dt>To</dt><dd>${m.to}</dd><dt>Message-ID</dt><dd><code>${m.messageId}</code></dd>
<dt>Status</dt><dd>${badge(m.status)} (${m.attempts} attempts${m.lastError ? html`; last error: ${m.lastError}` : ""})</dd>
<dt>Created</dt><dd>${when(m.createdAt)}</dd><dt>Sent</dt><dd>${when(m.sentAt)}</dd>
</dl>
${
  m.rendered
    ? html`<h2>${m.rendered.subject}</h2><pre>${m.rendered.text}</pre>`
    : html`<p class="muted">The message's values were cleared once it was sent.</p>`
}
<p><a href="/console/outbox">Back to the outbox</a></p>`;
    return pageResponse(c, layout({ title: "Message", section: "/console/outbox", viewer, body }));
  });
  return router;
}

/** The area (src/http/area.ts) of the e-mail outbox's console page (Development only), no API routes. */
export const emailOutboxArea = defineArea({
  name: "email-outbox",
  routes: [],
  consolePages: [
    {
      path: "/console/outbox",
      title: "Outbox",
      seenBy: STAFF_ROLES,
      routes: outboxPages,
      developmentOnly: true,
    },
  ],
});
