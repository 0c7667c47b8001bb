import { asc, desc, type SQL, sql } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import type { z } from "zod";
import type { createdAtPosition } from "../pagination.ts";

/**
 * A list in creation order, keyset-paged on (created_at, id) with `createdAtPosition` cursors
 * (pagination.ts): `asc` oldest first, `desc` newest first. `position` is the column to select for
 * the next cursor (the exact text of created_at), `past` the condition for the rows after `after`
 * (none on the first page), `orderBy` the order.
 */
export function creationOrder(
  table: { createdAt: AnyPgColumn; id: AnyPgColumn },
  direction: "asc" | "desc",
  after: z.output<typeof createdAtPosition> | undefined,
): { position: SQL<string>; past: SQL | undefined; orderBy: [SQL, SQL] } {
  const order = direction === "asc" ? asc : desc;
  const beyond = direction === "asc" ? sql`>` : sql`<`;
  return {
    position: sql<string>`${table.createdAt}::text`,
    past: after
      ? sql`(${table.createdAt}, ${table.id}) ${beyond} (${after.createdAt}::timestamptz, ${after.id}::uuid)`
      : undefined,
    orderBy: [order(table.createdAt), order(table.id)],
  };
}
