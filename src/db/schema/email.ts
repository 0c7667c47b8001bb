import { sql } from "drizzle-orm";
import { check, index, integer, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenantIsolation, tenants } from "./tenants.ts";

export const emailMessageStatuses = ["pending", "sent", "failed"] as const;
export type EmailMessageStatus = (typeof emailMessageStatuses)[number];

/**
 * The e-mail outbox: one row per message, written in the transaction of the change that causes it
 * (src/email/enqueue-email.ts), sent by the `email.send` job. `data` (the template's values, the
 * one-time link among them) is sealed with data protection and cleared once the message is sent
 * (kept in Development, where the console's outbox shows it).
 */
export const emailMessages = pgTable(
  "email_messages",
  {
    id: uuid().primaryKey().defaultRandom(),
    /** null for platform staff (the platform default provider sends). */
    tenantId: uuid().references(() => tenants.id, { onDelete: "cascade" }),
    recipient: text().notNull(),
    template: text().notNull(),
    locale: text().notNull(),
    /** Data protection payload (purpose `email-message`) of the template's values; null once sent. */
    sealedData: text(),
    status: text({ enum: emailMessageStatuses }).notNull().default("pending"),
    /** Send attempts started (a value above the recorded failures + 1 means a run died mid-send). */
    attempts: integer().notNull().default(0),
    /** `smtp`, `http` or `development`: which provider took the message. */
    provider: text(),
    /** The provider's answer (the SMTP reply line, the HTTP status): never the message. */
    providerResponse: text(),
    lastError: text(),
    sentAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    index("email_messages_tenant_idx").on(t.tenantId, t.createdAt),
    index("email_messages_created_idx").on(t.createdAt),
    check("email_messages_status_check", sql`${t.status} in ('pending', 'sent', 'failed')`),
    tenantIsolation(),
  ],
);
