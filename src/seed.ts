import { sql } from "drizzle-orm";
import { seedBillingCatalog } from "./billing/catalog.ts";
import type { Executor, Tx } from "./db/client.ts";
import { platformRoles } from "./db/schema/index.ts";
import { PLATFORM_ADMIN_ROLE, PLATFORM_VIEWER_ROLE } from "./identity/roles.ts";

/** A seeder writes part of the built-in catalog; it must be idempotent and may update rows. */
export type Seeder = { name: string; run: (tx: Tx) => Promise<void> };

const platformRoleCatalog: Seeder = {
  name: "platform roles",
  run: async (tx) => {
    await tx
      .insert(platformRoles)
      .values([
        {
          code: PLATFORM_ADMIN_ROLE,
          name: "Platform administrator",
          description: "Manages tenants, domains, providers, secrets and jobs across the platform.",
        },
        {
          code: PLATFORM_VIEWER_ROLE,
          name: "Platform viewer",
          description: "Reads everything platform administrators read (admin API, console); changes nothing.",
        },
      ])
      .onConflictDoUpdate({
        target: platformRoles.code,
        set: { name: sql`excluded.name`, description: sql`excluded.description` },
      });
  },
};

/** Every seeder, in order. Other areas (billing's plans and features) add theirs here. */
const billingCatalog: Seeder = {
  name: "billing catalog (features, plans, suspended set)",
  run: (tx) => seedBillingCatalog(tx),
};

export const seeders: Seeder[] = [platformRoleCatalog, billingCatalog];

/** Seeds the built-in catalog in one transaction; running it twice changes nothing. */
export async function seedCatalog(db: Executor, list: Seeder[] = seeders): Promise<string[]> {
  return db.transaction(async (tx) => {
    for (const seeder of list) await seeder.run(tx);
    return list.map((seeder) => seeder.name);
  });
}
