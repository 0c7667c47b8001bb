import { and, eq } from "drizzle-orm";
import type { TenantCtx } from "../context.ts";
import { creationOrder } from "../db/keyset.ts";
import { type DatabaseDeps, withDatabase } from "../db/operation.ts";
import { tenantInvitations } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { createdAtPosition, cursorCodec, type Page, pageByCreation } from "../pagination.ts";
import { type InvitationView, invitationColumns, invitationView } from "./invitation-rows.ts";

/** Where a page of invitations ends: the last one's creation time (PostgreSQL's exact text) and id. */
export const invitationCursor = cursorCodec(createdAtPosition);

/** A page of the ctx tenant's invitations in creation order, every status (`Expired` derived). */
export async function listInvitations(
  deps: DatabaseDeps & Pick<Deps, "clock">,
  ctx: TenantCtx,
  input: { limit: number; cursor?: string },
): Promise<Page<InvitationView>> {
  const after = invitationCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(tenantInvitations, "asc", after);
  const now = deps.clock.now();
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select({ ...invitationColumns, position: keyset.position })
      .from(tenantInvitations)
      .where(and(eq(tenantInvitations.tenantId, ctx.tenantId), keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  return pageByCreation(rows, input.limit, (row) => invitationView(row, now), invitationCursor);
}
