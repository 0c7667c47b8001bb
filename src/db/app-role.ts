/**
 * The role the API connects as (`Database:AppRole`, docs/tenant-isolation.md): no SUPERUSER, no
 * BYPASSRLS, owns nothing, so the row-level security of every tenant table holds it. The migrator
 * creates it when missing (where its own role may create roles), checks it and grants it the
 * tables; the API checks at start that it is connected as such a role.
 */
import { sql } from "drizzle-orm";
import { type Executor, execute } from "./client.ts";

/** What the migrator did for the app role. */
export interface AppRoleOutcome {
  role: string;
  created: boolean;
}

/** The app role is unfit (or missing where it may not be made): nothing was granted. */
export class AppRoleError extends Error {}

const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

interface RoleRow {
  super: boolean;
  bypass: boolean;
  owned: number;
}

async function roleOf(db: Executor, role: string): Promise<RoleRow | undefined> {
  const [row] = await execute<RoleRow>(
    db,
    sql`select r.rolsuper as super, r.rolbypassrls as bypass,
          (select count(*)::int from pg_class c where c.relowner = r.oid)
          + (select count(*)::int from pg_namespace n where n.nspowner = r.oid) as owned
        from pg_roles r where r.rolname = ${role}`,
  );
  return row;
}

/** What keeps `role` from being the app role, or null when nothing does. */
function unfitness(role: string, row: RoleRow): string | null {
  if (row.super) return `role ${role} is a superuser, which row-level security does not hold`;
  if (row.bypass) return `role ${role} has BYPASSRLS`;
  if (row.owned > 0) return `role ${role} owns ${row.owned} table(s) or schema(s) in this database`;
  return null;
}

/**
 * Creates the app role when missing (LOGIN, with `password` when given), refuses one that is a
 * superuser, has BYPASSRLS or owns anything here, and grants it what the API does on the schema:
 * rows of every table and sequence, now and in the tables this owner creates later.
 */
export async function ensureAppRole(
  db: Executor,
  options: { role: string; password?: string },
): Promise<AppRoleOutcome> {
  const { role } = options;
  if (!ROLE_NAME.test(role)) throw new AppRoleError(`Database:AppRole ${role} is not a plain role name`);
  let created = false;
  let row = await roleOf(db, role);
  if (!row) {
    const [me] = await execute<{ may: boolean }>(
      db,
      sql`select rolcreaterole or rolsuper as may from pg_roles where rolname = current_user`,
    );
    if (!me?.may)
      throw new AppRoleError(
        `role ${role} does not exist and the migrator's role may not create roles: create it as docs/tenant-isolation.md shows`,
      );
    // format() quotes the name and the password on the server: neither is spliced in here
    const [statement] = await execute<{ text: string }>(
      db,
      options.password
        ? sql`select format('create role %I login nosuperuser nobypassrls nocreatedb nocreaterole password %L', ${role}::text, ${options.password}::text) as text`
        : sql`select format('create role %I login nosuperuser nobypassrls nocreatedb nocreaterole', ${role}::text) as text`,
    );
    try {
      await db.execute(sql.raw(statement?.text ?? ""));
      created = true;
    } catch (error) {
      // another migrator (or test process) made it first: check it like any existing role
      const code = (error as { code?: string }).code ?? (error as { cause?: { code?: string } }).cause?.code;
      if (code !== "42710" && code !== "23505") throw error;
    }
    row = await roleOf(db, role);
    if (!row) throw new AppRoleError(`role ${role} could not be created`);
  }
  const problem = unfitness(role, row);
  if (problem) throw new AppRoleError(`${problem}: the API must connect as a role row-level security holds`);
  const [grants] = await execute<{ text: string }>(
    db,
    sql`select format(
          'grant usage on schema public to %1$I; '
          'grant select, insert, update, delete on all tables in schema public to %1$I; '
          'grant usage, select, update on all sequences in schema public to %1$I; '
          'alter default privileges in schema public grant select, insert, update, delete on tables to %1$I; '
          'alter default privileges in schema public grant usage, select, update on sequences to %1$I',
          ${role}::text) as text`,
  );
  for (const statement of (grants?.text ?? "").split("; ")) await db.execute(sql.raw(statement));
  return { role, created };
}

/** The connected role, and what keeps it from being held by row-level security (null: nothing). */
export async function connectedRoleProblem(db: Executor): Promise<{ role: string; problem: string | null }> {
  const [me] = await execute<{ role: string }>(db, sql`select current_user::text as role`);
  const role = me?.role ?? "";
  const row = await roleOf(db, role);
  return { role, problem: row ? unfitness(role, row) : null };
}
