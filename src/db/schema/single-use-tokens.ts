import { sql } from "drizzle-orm";
import { check, index, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { users } from "./identity.ts";
import { tenantIsolation, tenants } from "./tenants.ts";

export const singleUseTokenPurposes = [
  "password_reset",
  "email_verification",
  "invitation",
  "sign_up",
  "sign_in_link",
  "passkey_registration",
  "passkey_sign_in",
  "mfa_sign_in",
  "email_change",
] as const;
export type SingleUseTokenPurpose = (typeof singleUseTokenPurposes)[number];

/**
 * One-time tokens sent by e-mail, and the challenges of passkey ceremonies (src/auth/single-use-tokens.ts): stored only as SHA-256, bound to
 * a purpose, short-lived, consumed once by a conditional update.
 */
export const singleUseTokens = pgTable(
  "single_use_tokens",
  {
    id: uuid().primaryKey().defaultRandom(),
    /** null for platform staff. */
    tenantId: uuid().references(() => tenants.id, { onDelete: "cascade" }),
    userId: uuid().references(() => users.id, { onDelete: "cascade" }),
    purpose: text({ enum: singleUseTokenPurposes }).notNull(),
    tokenHash: text().notNull().unique(),
    /** What the token is about besides the user (the address to verify, an invitation id). */
    subject: text(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    usedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    index("single_use_tokens_user_idx").on(t.userId, t.purpose),
    index("single_use_tokens_tenant_idx").on(t.tenantId),
    check(
      "single_use_tokens_purpose_check",
      sql`${t.purpose} in ('password_reset', 'email_verification', 'invitation', 'sign_up', 'sign_in_link', 'passkey_registration', 'passkey_sign_in', 'mfa_sign_in', 'email_change')`,
    ),
    tenantIsolation(),
  ],
);
