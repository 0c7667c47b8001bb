import { sql } from "drizzle-orm";
import { seedBillingCatalog } from "./billing/catalog.ts";
import type { Ctx } from "./context.ts";
import type { Tx } from "./db/client.ts";
import { type DatabaseDeps, withTransaction } from "./db/operation.ts";
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

/** Seeds the built-in catalog (every seeder, or `input.seeders`) in one transaction; running it twice changes nothing. */
export async function seedCatalog(
  deps: DatabaseDeps,
  ctx: Ctx,
  input: { seeders?: Seeder[] } = {},
): Promise<string[]> {
  const list = input.seeders ?? seeders;
  return withTransaction(deps, ctx, async (tx) => {
    for (const seeder of list) await seeder.run(tx);
    return list.map((seeder) => seeder.name);
  });
}
