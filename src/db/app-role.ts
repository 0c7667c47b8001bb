/**
 * The role the API connects as (`Database:AppRole`, default `plinth_app`): it logs in, owns nothing,
 * is neither superuser nor BYPASSRLS, and may read and write rows (DML) but change no schema, so
 * row-level security holds it (docs/deployment.md, "The database roles"). `bun run migrate` creates it
 * where it may (CREATEROLE), else checks the one an operator made, and grants it every table.
 */
import { sql } from "drizzle-orm";
import { type Db, type Executor, execute } from "./client.ts";
import { describeDatabaseFailure } from "./database-failure.ts";
import { MIGRATION_LOCK } from "./migrator.ts";

export const DEFAULT_APP_ROLE = "plinth_app";

const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The role is unusable as the API's: it would not be held by row-level security, or may change the schema. */
export class AppRoleError extends Error {}

interface RoleRow {
  superuser: boolean;
  bypassrls: boolean;
  login: boolean;
  owned: number;
}

async function roleOf(db: Executor, role: string): Promise<RoleRow | undefined> {
  const [row] = await execute<RoleRow>(
    db,
    sql`select r.rolsuper as superuser, r.rolbypassrls as bypassrls, r.rolcanlogin as login,
          (select count(*)::int from pg_class c where c.relowner = r.oid
             and c.relnamespace = 'public'::regnamespace) as owned
        from pg_roles r where r.rolname = ${role}`,
  );
  return row;
}

/** Why `role` cannot serve the API, or null when it can. */
export function appRoleProblem(role: string, row: RoleRow | undefined): string | null {
  if (!row) return `role ${role} does not exist`;
  if (row.superuser) return `role ${role} is a superuser (row-level security does not hold it)`;
  if (row.bypassrls) return `role ${role} has BYPASSRLS`;
  if (row.owned > 0)
    return `role ${role} owns ${row.owned} relations in schema public (an owner may drop the policies)`;
  if (!row.login) return `role ${role} cannot log in`;
  return null;
}

/**
 * Creates `role` when it is missing (with `password` when given), checks it, and grants it DML on
 * every table and use of every sequence in schema public (again after each migration: new tables
 * need it). Idempotent; a second migrator racing to create the role finds it made.
 */
export async function ensureAppRole(
  db: Db,
  options: { role: string; password?: string },
): Promise<{ created: boolean }> {
  const { role } = options;
  if (!ROLE_NAME.test(role))
    throw new AppRoleError(`Database:AppRole ${JSON.stringify(role)} is not a plain role name`);
  let created = false;
  if (!(await roleOf(db, role))) {
    // DDL takes no parameters: format() quotes the name and the password server-side
    const [ddl] = await execute<{ text: string }>(
      db,
      options.password
        ? sql`select format('create role %I login nosuperuser nobypassrls nocreatedb nocreaterole password %L', ${role}::text, ${options.password}::text) as text`
        : sql`select format('create role %I login nosuperuser nobypassrls nocreatedb nocreaterole', ${role}::text) as text`,
    );
    try {
      await db.execute(sql.raw(ddl?.text ?? ""));
      created = true;
    } catch (error) {
      // 42710 (or 23505 when both inserted at once): another migrator made it meanwhile; anything else (42501: no CREATEROLE) is the
      // operator's to do. The statement holds the password: only the code is repeated.
      const code = describeDatabaseFailure(error).code;
      if (code !== "42710" && code !== "23505") {
        throw new AppRoleError(
          `could not create role ${role} (${code ?? "error"}): create it as the operator (docs/deployment.md, "The database roles")`,
        );
      }
    }
  }
  const problem = appRoleProblem(role, await roleOf(db, role));
  if (problem) throw new AppRoleError(problem);
  // Two GRANTs on one table at once fail with "tuple concurrently updated" (both rewrite its ACL):
  // migrators started together take turns here under the migrations' own lock.
  await db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    for (const grant of [
      `grant usage on schema public to "${role}"`,
      `grant select, insert, update, delete on all tables in schema public to "${role}"`,
      `grant usage, select on all sequences in schema public to "${role}"`,
      `revoke insert, update, delete on schema_migrations from "${role}"`,
    ]) {
      await tx.execute(sql.raw(grant));
    }
  });
  return { created };
}

/** Why row-level security does not hold the role a connection runs as (docs/deployment.md, "The database roles"). */
export interface UnheldRole {
  role: string;
  /** What it is and why that matters, e.g. `a superuser: row-level security does not hold it`. */
  reason: string;
}

/**
 * The role this connection's statements run as, when row-level security does not hold it: a
 * superuser or a BYPASSRLS role passes every policy, and an owner of tables in schema public is held
 * by FORCE but may drop the policies (so may a role with the owner's privileges). Null for a role the policies hold (the API's, `Database:AppRole`).
 */
export async function roleNotHeldByRowSecurity(db: Executor): Promise<UnheldRole | null> {
  const [row] = await execute<RoleRow & { role: string }>(
    db,
    sql`select current_user::text as role, r.rolsuper as superuser, r.rolbypassrls as bypassrls,
          r.rolcanlogin as login,
          (select count(*)::int from pg_class c where pg_has_role(r.oid, c.relowner, 'USAGE')
             and c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')) as owned
        from pg_roles r where r.rolname = current_user`,
  );
  if (!row) return null;
  const unheld = "row-level security does not hold it";
  if (row.superuser) return { role: row.role, reason: `a superuser: ${unheld}` };
  if (row.bypassrls) return { role: row.role, reason: `a BYPASSRLS role: ${unheld}` };
  if (row.owned > 0)
    return {
      role: row.role,
      reason: `the owner of ${row.owned} table${row.owned === 1 ? "" : "s"} in schema public: it may drop their row-level security policies`,
    };
  return null;
}
