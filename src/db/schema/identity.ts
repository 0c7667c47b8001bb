import { boolean, pgTable, primaryKey, text, timestamp, unique, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenants } from "./tenants.ts";

export const users = pgTable(
  "users",
  {
    id: uuid().primaryKey().defaultRandom(),
    /** null for platform staff, who belong to no tenant. */
    tenantId: uuid().references(() => tenants.id, { onDelete: "cascade" }),
    /** Stored lower-cased; unique per tenant, and among platform staff. */
    email: text().notNull(),
    name: text().notNull().default(""),
    /** argon2id in PHC form; null for users who sign in only by SMS. */
    passwordHash: text(),
    status: text({ enum: ["Active", "Disabled"] })
      .notNull()
      .default("Active"),
    mustChangePassword: boolean().notNull().default(false),
    passwordChangedAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [unique("users_tenant_email_unique").on(t.tenantId, t.email).nullsNotDistinct()],
);

/** Built-in catalog of platform roles (seeded by the migrator). */
export const platformRoles = pgTable("platform_roles", {
  code: text().primaryKey(),
  name: text().notNull(),
  description: text().notNull().default(""),
});

export const platformRoleBindings = pgTable(
  "platform_role_bindings",
  {
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text()
      .notNull()
      .references(() => platformRoles.code),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.role] })],
);
