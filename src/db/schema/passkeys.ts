import { bigint, boolean, index, pgTable, text, timestamp, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { users } from "./identity.ts";
import { tenantIsolation, tenants } from "./tenants.ts";

/**
 * WebAuthn credentials (passkeys) of a user in one tenant, or of platform staff (`tenant_id` null),
 * each bound to the relying-party id (the host) it was registered on (src/auth/passkeys.ts). Only
 * public data: the credential's id and public key, its signature counter and flags.
 */
export const passkeys = pgTable(
  "passkeys",
  {
    id: uuid().primaryKey().defaultRandom(),
    /** null for platform staff. */
    tenantId: uuid().references(() => tenants.id, { onDelete: "cascade" }),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** The user's own label ("Work laptop"). */
    name: text().notNull(),
    /** The relying-party id (a host name) the credential is scoped to. */
    rpId: text().notNull(),
    /** The credential id, base64url. */
    credentialId: text().notNull(),
    /** The COSE public key, base64url. */
    publicKey: text().notNull(),
    /** The authenticator's signature counter (0 for authenticators that keep none). */
    counter: bigint({ mode: "number" }).notNull().default(0),
    transports: text().array().notNull().default([]),
    /** The authenticator's model (AAGUID; all zeros when it names none). */
    aaguid: text().notNull(),
    /** Backup eligible (a synced, multi-device passkey) and backed up, as the authenticator says. */
    backupEligible: boolean().notNull(),
    backedUp: boolean().notNull(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    lastUsedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    uniqueIndex("passkeys_credential_idx").on(t.rpId, t.credentialId),
    index("passkeys_user_idx").on(t.userId),
    index("passkeys_tenant_idx").on(t.tenantId),
    tenantIsolation(),
  ],
);
