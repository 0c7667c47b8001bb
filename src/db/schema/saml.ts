import { index, pgTable, text, timestamp, unique, uuid } from "drizzle-orm/pg-core";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/**
 * Assertion ids a SAML connection already accepted, remembered until the assertion expires (its
 * NotOnOrAfter plus the clock skew): the same assertion posted again is refused as a replay
 * (src/sso/saml/saml-response.ts). Expired rows are deleted as new ones of the connection arrive.
 */
export const samlAssertions = pgTable(
  "saml_assertions",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    /** The SSO connection that accepted it (rows outlive a deleted connection only until they expire). */
    connectionId: uuid().notNull(),
    /** The assertion's `ID`, as the IdP wrote it. */
    assertionId: text().notNull(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique("saml_assertions_connection_assertion_key").on(t.connectionId, t.assertionId),
    index("saml_assertions_expiry_idx").on(t.connectionId, t.expiresAt),
    tenantIsolation(),
  ],
);
