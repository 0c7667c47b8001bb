import { sql } from "drizzle-orm";
import { index, pgTable, text, timestamp, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenantRoles, users } from "./identity.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/**
 * An address a tenant's owner or admin invited, with the role it gets: one Pending invitation per
 * address and tenant. The link's token is a single-use token (`single_use_tokens`, purpose
 * `invitation`, subject: the invitation's id), replaced on resend so an older link stops working;
 * accepting, revoking or expiring ends it.
 */
export const tenantInvitations = pgTable(
  "tenant_invitations",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    /** Stored lower-cased. */
    email: text().notNull(),
    role: text({ enum: tenantRoles }).notNull(),
    status: text({ enum: ["Pending", "Accepted", "Revoked"] })
      .notNull()
      .default("Pending"),
    invitedBy: uuid().references(() => users.id, { onDelete: "set null" }),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    sentAt: timestamp({ withTimezone: true }).notNull(),
    acceptedAt: timestamp({ withTimezone: true }),
    acceptedBy: uuid().references(() => users.id, { onDelete: "set null" }),
    revokedAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("tenant_invitations_pending_idx").on(t.tenantId, t.email).where(sql`${t.status} = 'Pending'`),
    index("tenant_invitations_list_idx").on(t.tenantId, t.createdAt, t.id),
    tenantIsolation(),
  ],
);
