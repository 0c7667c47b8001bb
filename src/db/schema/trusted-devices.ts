import { index, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { users } from "./identity.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/**
 * Browsers a user trusted at a sign-in step (`trustDevice: true` on POST /api/auth/mfa/verify): a
 * password or e-mail-code sign-in of that user in that tenant carrying the device's sealed cookie skips
 * the second-factor step while the tenant allows it (src/auth/trusted-devices.ts; docs/auth.md
 * "Trusted devices"). Only the SHA-256 of the device's secret is kept; the cookie holds the secret.
 */
export const trustedDevices = pgTable(
  "trusted_devices",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** SHA-256 (hex) of the 256-bit secret the cookie carries. */
    secretHash: text().notNull(),
    /** The `User-Agent` that trusted it (at most 512 characters): the label its user sees. */
    userAgent: text(),
    /** The client address that trusted it. */
    clientIp: text(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    /** The last sign-in that skipped the step with it (and from where). */
    lastUsedAt: timestamp({ withTimezone: true }),
    lastUsedIp: text(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    revokedAt: timestamp({ withTimezone: true }),
    revokedReason: text(),
  },
  (t) => [index("trusted_devices_user_idx").on(t.tenantId, t.userId), tenantIsolation()],
);
