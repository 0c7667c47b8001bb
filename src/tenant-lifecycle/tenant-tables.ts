/**
 * Which rows of the database are a tenant's, read from the catalog, never from a hand-kept list of
 * tenant tables (docs/tenant-lifecycle.md): every table with a `tenant_id` column, every table that
 * reaches one through a foreign key (`refresh_tokens` through `sessions`, `webhook_delivery_attempts`
 * through `webhook_deliveries`, `job_dependencies` through `background_jobs`…), the tables below keyed
 * by the tenant another way, and `tenants` itself. Every other table must be named in PLATFORM_TABLES
 * with why it holds nothing of a tenant: `tenantTables` throws on a table that is neither, so a new
 * table is classified before export or deletion can run (and the test suite fails until it is).
 */
import { sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";

/** Tables that hold a tenant's rows without a `tenant_id` column: the condition on alias `t` ($1 = the tenant id). */
export const KEYED_TABLES: Record<string, (t: string) => string> = {
  tenants: (t) => `${t}.id = $1::uuid`,
  // a tenant's jobs carry its id as their fairness group (src/jobs/enqueue.ts)
  background_jobs: (t) => `${t}.group_key = $1::text`,
  audit_chains: (t) => `${t}.chain = $1::text`,
};

/** Tables that hold nothing of any one tenant, and why. */
export const PLATFORM_TABLES: Record<string, string> = {
  schema_migrations: "the migrator's record",
  features: "the feature catalog",
  plans: "the plan catalog",
  plan_features: "the plan catalog",
  platform_roles: "the platform role catalog",
  data_protection_keys: "the installation's data-protection key ring",
  tenant_secret_keys: "fingerprints of the installation's master keys",
  security_counters: "rate-limit windows by client address (Development only), expiring",
  sign_up_requests: "self-serve sign-ups before a tenant exists",
  job_group_slots: "slots of running jobs, removed by trigger when each ends",
  job_rate_limits: "rate state of job kinds",
  job_schedules: "the installation's recurring schedules",
  tenant_reservations: "codes and hosts of deleted tenants, kept from reuse on purpose",
};

/** One table's share of a tenant: how to select it, and the tables it must follow on insert. */
export interface TenantTable {
  name: string;
  /** A condition on alias `t` with `$1` the tenant id (identifiers from the catalog, quoted). */
  where: string;
  /** The same condition on another alias. */
  whereAs: (alias: string) => string;
  /** The tenant tables it references (parents first on insert, last on delete). */
  dependsOn: string[];
  /** Reached only through a parent's foreign key. */
  child: boolean;
  /** Its foreign keys to other tables (its parents among the tenant tables and the catalogs). */
  references: ForeignKey[];
}

export interface ForeignKey {
  table: string;
  parent: string;
  columns: string[];
  parentColumns: string[];
  /** Every column of the key is NOT NULL: the row cannot exist without its parent. */
  required: boolean;
}

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

async function catalog(db: Executor) {
  const tables = await execute<{ name: string; tenant: boolean }>(
    db,
    sql`select c.relname as name,
          exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped) as tenant
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p') order by c.relname`,
  );
  const keys = await execute<{
    table: string;
    parent: string;
    columns: string[];
    parent_columns: string[];
    required: boolean;
  }>(
    db,
    sql`select c.relname as table, p.relname as parent,
          array(select a.attname::text from unnest(k.conkey) with ordinality u(n, i)
                join pg_attribute a on a.attrelid = k.conrelid and a.attnum = u.n order by u.i) as columns,
          array(select a.attname::text from unnest(k.confkey) with ordinality u(n, i)
                join pg_attribute a on a.attrelid = k.confrelid and a.attnum = u.n order by u.i) as parent_columns,
          (select bool_and(a.attnotnull) from unnest(k.conkey) u(n)
                join pg_attribute a on a.attrelid = k.conrelid and a.attnum = u.n) as required
        from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid
        join pg_namespace n on n.oid = c.relnamespace
        where k.contype = 'f' and n.nspname = current_schema() order by c.relname, k.conname`,
  );
  const foreignKeys: ForeignKey[] = keys.map((k) => ({
    table: k.table,
    parent: k.parent,
    columns: k.columns,
    parentColumns: k.parent_columns,
    required: k.required,
  }));
  return { tables, foreignKeys };
}

/** The tables no classification covers (empty when every table is a tenant's or a named platform one). */
export async function unclassifiedTables(db: Executor): Promise<string[]> {
  const found = await findTenantTables(db);
  return found.unclassified;
}

async function findTenantTables(db: Executor): Promise<{ tables: TenantTable[]; unclassified: string[] }> {
  const { tables, foreignKeys } = await catalog(db);
  const where = new Map<string, (t: string) => string>();
  const child = new Set<string>();
  for (const table of tables) {
    const keyed = KEYED_TABLES[table.name];
    if (keyed) where.set(table.name, keyed);
    else if (table.tenant) where.set(table.name, (t) => `${t}.tenant_id = $1::uuid`);
  }
  // children: a table without its own key that references a tenant table, to any depth
  for (let grew = true, depth = 0; grew; depth++) {
    grew = false;
    for (const key of foreignKeys) {
      const parent = where.get(key.parent);
      if (where.has(key.table) || PLATFORM_TABLES[key.table] || !parent || key.parent === key.table) continue;
      const alias = `p${depth}`;
      where.set(key.table, (t) => {
        const columns = key.columns.map((c) => `${t}.${quote(c)}`);
        const left = columns.length === 1 ? columns[0] : `(${columns.join(", ")})`;
        const right = key.parentColumns.map((c) => `${alias}.${quote(c)}`).join(", ");
        return `${left} in (select ${right} from ${quote(key.parent)} ${alias} where ${parent(alias)})`;
      });
      child.add(key.table);
      grew = true;
    }
  }
  const found: TenantTable[] = [];
  const unclassified: string[] = [];
  for (const table of tables) {
    const condition = where.get(table.name);
    if (!condition) {
      if (!PLATFORM_TABLES[table.name]) unclassified.push(table.name);
      continue;
    }
    const dependsOn = foreignKeys
      .filter((k) => k.table === table.name && k.parent !== table.name && where.has(k.parent))
      .map((k) => k.parent);
    const references = foreignKeys.filter((k) => k.table === table.name && k.parent !== table.name);
    found.push({
      references,
      name: table.name,
      where: condition("t"),
      whereAs: condition,
      dependsOn: [...new Set(dependsOn)],
      child: child.has(table.name),
    });
  }
  return { tables: insertOrder(found), unclassified };
}

/** Parents before children (the order to insert in; deletion walks it backwards). */
function insertOrder(tables: TenantTable[]): TenantTable[] {
  const byName = new Map(tables.map((t) => [t.name, t]));
  const done = new Set<string>();
  const out: TenantTable[] = [];
  const visit = (table: TenantTable, path: Set<string>) => {
    if (done.has(table.name) || path.has(table.name)) return;
    path.add(table.name);
    for (const parent of table.dependsOn) {
      const found = byName.get(parent);
      if (found) visit(found, path);
    }
    done.add(table.name);
    out.push(table);
  };
  for (const table of tables) visit(table, new Set());
  return out;
}

/** A table the catalog has that no classification covers: export and deletion refuse to run. */
export class UnclassifiedTableError extends Error {
  override name = "UnclassifiedTableError";
}

/** Every table that holds rows of a tenant, in insert order; throws when a table is unclassified. */
export async function tenantTables(db: Executor): Promise<TenantTable[]> {
  const { tables, unclassified } = await findTenantTables(db);
  if (unclassified.length > 0)
    throw new UnclassifiedTableError(
      `tables neither a tenant's nor named platform tables (src/tenant-lifecycle/tenant-tables.ts): ${unclassified.join(", ")}`,
    );
  return tables;
}

/** `select` of a tenant's rows of one table, as one JSON object per row ($1 = the tenant id). */
export function selectRows(table: TenantTable): string {
  return `select row_to_json(t)::text as row from ${quote(table.name)} t where ${table.where}`;
}

export { quote as quoteIdentifier };
