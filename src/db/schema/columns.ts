import { timestamp } from "drizzle-orm/pg-core";

/** created_at / updated_at, both defaulting to now(). */
export const timestamps = {
  createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
};
