import { bigint, index, pgTable, text, timestamp, unique, uuid } from "drizzle-orm/pg-core";
import { users } from "./identity.ts";
import { parentIsolation } from "./tenants.ts";

/**
 * A user's TOTP authenticator (RFC 6238; docs/auth.md "Second factors"). The shared secret is sealed
 * like a tenant secret (AES-256-GCM under `Security:TenantSecrets`, bound to the user), never stored
 * in clear. One per user; `confirmedAt` is null until a first code proved the enrolment. It belongs to
 * a tenant only through its user (a shared identity or platform staff has none), so it carries no
 * `tenant_id` and is held by its user's policy (`parentIsolation`), like `refresh_tokens` by its session's.
 */
export const totpFactors = pgTable(
  "totp_factors",
  {
    id: uuid().primaryKey().defaultRandom(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    secretKeyId: text().notNull(),
    secretNonce: text().notNull(),
    secretCiphertext: text().notNull(),
    confirmedAt: timestamp({ withTimezone: true }),
    /** The newest 30-second step a code was accepted for: that code and every older one are spent. */
    lastUsedStep: bigint({ mode: "number" }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique("totp_factors_user_unique").on(t.userId),
    parentIsolation("totp_factors", "user_id", "users"),
  ],
);

/** Backup codes: ten per set, shown once, stored only as SHA-256 (bound to the user), each usable once. */
export const backupCodes = pgTable(
  "backup_codes",
  {
    id: uuid().primaryKey().defaultRandom(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    codeHash: text().notNull(),
    usedAt: timestamp({ withTimezone: true }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("backup_codes_user_idx").on(t.userId), parentIsolation("backup_codes", "user_id", "users")],
);
