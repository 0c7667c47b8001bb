import { pgTable, text, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";

export const tenants = pgTable("tenants", {
  id: uuid().primaryKey().defaultRandom(),
  /** Short unique code: used on the platform host's tenant-code paths and at login. */
  code: text().notNull().unique(),
  name: text().notNull(),
  status: text({ enum: ["Active", "Suspended"] })
    .notNull()
    .default("Active"),
  ...timestamps,
});

/** `tenant_id`: required, and the row goes with its tenant. */
export const tenantIdColumn = () =>
  uuid()
    .notNull()
    .references(() => tenants.id, { onDelete: "cascade" });
