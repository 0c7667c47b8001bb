import type { AuthenticationResponseJSON } from "@simplewebauthn/server";
import { Hono } from "hono";
import { html } from "hono/html";
import { z } from "zod";
import { completeBrowserSignIn } from "../../auth/browser-sessions.ts";
import { finishMfaSignIn } from "../../auth/mfa-sign-in.ts";
import { finishPasskeySignIn, passkeyCheck } from "../../auth/passkey-sign-in.ts";
import { listPasskeys, type PasskeyView, removePasskey, renamePasskey } from "../../auth/passkeys.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../tenancy/tenants.ts";
import { toAppError } from "../problem-json.ts";
import { anonymousCtxOf, ctxOf } from "../request-context.ts";
import { rpIdOf } from "../routes/auth-passkeys.ts";
import { authenticationResponse } from "../routes/webauthn-schemas.ts";
import { consoleAssets } from "./assets.ts";
import { csrfField, type Html, layout, notice, type Viewer, when } from "./layout.ts";
import { consoleActed, formOf, pageResponse } from "./respond.ts";
import { type ConsoleEnv, enterConsole, originRefused, seeOther, viewerOf } from "./session.ts";

const DONE: Record<string, string> = {
  added: "Passkey added. You can sign in with it alone.",
  renamed: "Passkey renamed.",
  removed: "Passkey removed.",
};

function passkeyRow(viewer: Viewer, p: PasskeyView): Html {
  return html`<tr>
<th scope="row">${p.name}</th>
<td><code>${p.rpId}</code></td>
<td>${p.backupEligible ? "synced" : "this device"}${p.backedUp ? " · backed up" : ""}</td>
<td>${when(p.createdAt)}</td>
<td>${when(p.lastUsedAt)}</td>
<td class="actions">
<form class="inline" method="post" action="/console/passkeys/${p.id}/rename">${csrfField(viewer)}
<label for="name-${p.id}" class="visually-hidden">New name of ${p.name}</label>
<input id="name-${p.id}" name="name" required maxlength="64" value="${p.name}">
<button type="submit" class="secondary">Rename</button></form>
<form class="inline" method="post" action="/console/passkeys/${p.id}/remove">${csrfField(viewer)}<button type="submit" class="danger">Remove</button></form>
</td>
</tr>`;
}

function passkeysBody(viewer: Viewer, items: PasskeyView[], done: string | undefined): Html {
  const table =
    items.length === 0
      ? html`<p class="muted">No passkey yet: sign-in takes your password.</p>`
      : html`<div class="table-wrap"><table class="stack"><thead><tr><th scope="col">Name</th><th scope="col">Host</th><th scope="col">Kind</th><th scope="col">Added</th><th scope="col">Last used</th><th scope="col">Change</th></tr></thead>
<tbody>${items.map((p) => passkeyRow(viewer, p))}</tbody></table></div>`;
  return html`${notice(done ? DONE[done] : undefined, "ok")}
<p id="passkey-status" class="notice" role="status" aria-live="polite"></p>
${table}
<h2>Add a passkey</h2>
<form id="passkey-add" class="stack">${csrfField(viewer)}
<label for="passkey-name">Name<input id="passkey-name" name="name" required maxlength="64" placeholder="Work laptop"></label>
<button type="submit">Add a passkey</button>
</form>
<p class="muted">A passkey signs you in to this console on this host without a password; your device keeps its private key.</p>`;
}

/** `/console/passkeys`: the signed-in staff member's passkeys (add, rename, remove). */
export function passkeyPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/passkeys", async (c) => {
    const viewer = viewerOf(c);
    const { items } = await listPasskeys(deps, ctxOf(c)); // one page holds them all (at most MAX_PASSKEYS)
    const done = Object.keys(DONE).find((key) => c.req.query(key) !== undefined);
    const { webauthn, passkeys } = consoleAssets();
    return pageResponse(
      c,
      layout({
        title: "Passkeys",
        section: "/console/passkeys",
        viewer,
        body: passkeysBody(viewer, items, done),
        scripts: [webauthn.path, passkeys.path],
      }),
    );
  });

  router.post("/console/passkeys/:id/rename", async (c) => {
    const id = c.req.param("id");
    if (!isUuid(id)) throw new AppError("not_found", "No passkey of yours has this id.");
    const name = ((await formOf(c)).name ?? "").trim();
    if (name.length < 1 || name.length > 64)
      throw new AppError("validation_failed", "A passkey's name is 1 to 64 characters.", {
        fields: [{ path: "name", message: "1 to 64 characters" }],
      });
    await renamePasskey(deps, ctxOf(c), { id, name });
    consoleActed(deps, c, "passkey.renamed", { type: "passkey", id });
    return seeOther(c, "/console/passkeys?renamed");
  });

  router.post("/console/passkeys/:id/remove", async (c) => {
    const id = c.req.param("id");
    if (!isUuid(id)) throw new AppError("not_found", "No passkey of yours has this id.");
    await removePasskey(deps, ctxOf(c), { id });
    consoleActed(deps, c, "passkey.removed", { type: "passkey", id });
    return seeOther(c, "/console/passkeys?removed");
  });
  return router;
}

const passkeySignIn = z.object({
  response: authenticationResponse,
  next: z.string().max(512).optional(),
  /** The second step of a password sign-in (sign-in-mfa.ts) this passkey completes. */
  mfaToken: z.string().min(1).max(128).optional(),
});

/**
 * `POST /console/sign-in/passkey` `{ response, next, mfaToken? }` (JSON, from the sign-in pages'
 * script): a staff member's passkey alone opens the console's browser session, as the password form
 * does; with `mfaToken`, it completes the second step of a password sign-in instead.
 * Answers `{ next }` (where to go), or 401 `{ detail }` for anything not verified.
 */
export function passkeySignInRoute(deps: Deps, originAllowed: (origin: string) => boolean) {
  return new Hono<ConsoleEnv>().post("/console/sign-in/passkey", async (c) => {
    if (c.get("tenant")) throw new AppError("not_found", "No such resource.");
    const origin = c.req.header("origin");
    if (!origin || !originAllowed(origin)) throw originRefused(origin);
    const body = passkeySignIn.safeParse(await c.req.json().catch(() => null));
    if (!body.success) return c.json({ detail: "The request is not valid." }, 400);
    try {
      // no tenant: platform staff sign in on the platform host
      const ctx = anonymousCtxOf(c, null);
      const input = { rpId: rpIdOf(c), response: body.data.response as AuthenticationResponseJSON };
      const { mfaToken } = body.data;
      const done = mfaToken
        ? await finishMfaSignIn(deps, ctx, { mfaToken, browserAllowed: true, ...passkeyCheck(deps, input) })
        : {
            kind: "browser" as const,
            session: await completeBrowserSignIn(deps, await finishPasskeySignIn(deps, ctx, input)),
          };
      if (done.kind !== "browser" || "mfaRequired" in done.session)
        return c.json({ detail: "Sign in again." }, 401);
      const next = enterConsole(c, deps, done.session, body.data.next);
      c.header("cache-control", "no-store");
      return c.json({ next }, 200);
    } catch (error) {
      if (toAppError(error).code !== "unauthorized") throw error;
      return c.json({ detail: "This passkey does not sign in here." }, 401);
    }
  });
}
