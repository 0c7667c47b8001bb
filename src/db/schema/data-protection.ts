import { sql } from "drizzle-orm";
import { check, index, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/**
 * The data-protection key ring: 256-bit keys, each wrapped with the certificate's RSA public key
 * (RSA-OAEP-SHA256), or stored bare (`none`) only in Development without a certificate.
 */
export const dataProtectionKeys = pgTable(
  "data_protection_keys",
  {
    id: uuid().primaryKey(),
    /** `rsa-oaep-sha256` (wrapped by the certificate) or `none` (Development only, bare key). */
    protection: text({ enum: ["rsa-oaep-sha256", "none"] }).notNull(),
    /** SHA-256 fingerprint of the wrapping certificate; null when unprotected. */
    certificateThumbprint: text(),
    /** Base64 of the wrapped (or bare) key. */
    keyMaterial: text().notNull(),
    activatesAt: timestamp({ withTimezone: true }).notNull(),
    /** New payloads use the newest key active before this; older payloads keep unprotecting after it. */
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    revokedAt: timestamp({ withTimezone: true }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("data_protection_keys_protection_check", sql`${t.protection} in ('rsa-oaep-sha256', 'none')`),
    index("data_protection_keys_expires_idx").on(t.expiresAt),
  ],
);
