import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { findConnectionRow } from "./connections.ts";
import { type StartedSignIn, startSsoSignIn } from "./discover.ts";
import type { SsoDeps } from "./sso-deps.ts";

/**
 * Starts a test sign-in at one of the ctx tenant's connections, enabled or not
 * (`POST /api/tenant/sso/connections/{id}/test`): the browser goes to the provider, and the callback
 * answers a report of every check in words (`SsoTestReport`) instead of signing anyone in or
 * provisioning a member. Bound to the browser that asks, as every sign-in is. 402 without `sso`.
 * `reportTo`: an address of the console (under `Server:PublicBaseUrl`, built by the console, never
 * taken from a request) the browser goes on to with the sealed report (test-report.ts); without
 * one the callback answers the report itself.
 */
export async function startTestSignIn(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { id: string; browserBinding: string; reportTo?: string },
): Promise<StartedSignIn> {
  const connection = await withDatabase(deps, ctx, (db) => findConnectionRow(db, ctx, input.id));
  await assertFeature(deps, ctx, { feature: "sso" });
  return startSsoSignIn(deps, ctx, {
    connection,
    returnTo: input.reportTo ?? "",
    test: true,
    browserBinding: input.browserBinding,
  });
}
