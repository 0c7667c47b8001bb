import { sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { execute } from "../db/client.ts";
import { type DatabaseDeps, withPlatformDatabase, withPlatformTransaction } from "../db/operation.ts";
import { platformRoleBindings, users } from "../db/schema/index.ts";
import { hashPassword, MIN_PASSWORD_LENGTH, passwordProblem } from "../security/passwords.ts";
import { PLATFORM_ADMIN_ROLE } from "./roles.ts";

export const bootstrapInputSchema = z.object({
  email: z.email({ error: "must be a valid e-mail address" }).transform((email) => email.toLowerCase()),
  password: z
    .string({ error: "is required" })
    .min(MIN_PASSWORD_LENGTH, { error: `must be at least ${MIN_PASSWORD_LENGTH} characters` }),
  name: z.string({ error: "is required" }).trim().min(1, { error: "is required" }),
});
export type BootstrapInput = z.input<typeof bootstrapInputSchema>;

const variableOf = { email: "EMAIL", password: "PASSWORD", name: "NAME" } as const;

/**
 * Why bootstrap input cannot be used, by variable name; the password itself is never echoed. The
 * spec asks for a strong temporary password: it must also pass `passwordProblem` (the first
 * administrator's is the key to everything).
 */
export async function checkBootstrapInput(input: Partial<BootstrapInput>): Promise<string[]> {
  const name = (field: keyof typeof variableOf) => `PLINTH_BOOTSTRAP_PLATFORM_ADMIN_${variableOf[field]}`;
  const parsed = bootstrapInputSchema.safeParse(input);
  if (!parsed.success)
    return parsed.error.issues.map((issue) => {
      const field = String(issue.path[0]) as keyof typeof variableOf;
      const message = input[field] === undefined || input[field] === "" ? "is required" : issue.message;
      return `${variableOf[field] ? name(field) : "PLINTH_BOOTSTRAP_PLATFORM_ADMIN_?"} ${message}`;
    });
  const weakness = await passwordProblem(parsed.data.password, parsed.data);
  return weakness ? [`${name("password")} ${weakness}`] : [];
}

export class BootstrapRefusedError extends Error {
  override name = "BootstrapRefusedError";
}

/** True when any user holds a platform role (also false when the tables do not exist yet). */
export async function platformAdminExists(deps: DatabaseDeps, ctx: Ctx): Promise<boolean> {
  // any user's binding, whichever pool: the platform path
  return withPlatformDatabase(deps, ctx, async (db) => {
    const [table] = await execute<{ exists: boolean }>(
      db,
      sql`select to_regclass('public.platform_role_bindings') is not null as exists`,
    );
    if (!table?.exists) return false;
    const rows = await execute(db, sql`select 1 from platform_role_bindings limit 1`);
    return rows.length > 0;
  });
}

/**
 * Creates the first platform administrator: a platform user (no tenant), the platform_admin
 * binding, the password hashed with argon2id and flagged must-change-password. Refuses when any
 * platform-role binding exists, checked under a lock so two bootstraps cannot both succeed.
 */
export async function bootstrapPlatformAdmin(
  deps: DatabaseDeps,
  ctx: Ctx,
  input: BootstrapInput,
): Promise<{ userId: string }> {
  const parsed = bootstrapInputSchema.parse(input);
  const problems = await checkBootstrapInput(input);
  if (problems.length > 0) throw new Error(`bootstrap input refused: ${problems.join("; ")}`);
  const passwordHash = await hashPassword(parsed.password);
  // a platform user and its binding: the platform path
  return withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    await execute(tx, sql`lock table platform_role_bindings in exclusive mode`);
    if (await platformAdminExists(deps, ctx)) {
      throw new BootstrapRefusedError("a platform administrator already exists");
    }
    const [user] = await tx
      .insert(users)
      .values({
        tenantId: null,
        pool: "platform",
        email: parsed.email,
        name: parsed.name,
        passwordHash,
        mustChangePassword: true,
      })
      .onConflictDoUpdate({
        target: [users.pool, users.tenantId, users.email],
        set: {
          name: parsed.name,
          passwordHash,
          mustChangePassword: true,
          status: "Active",
          updatedAt: sql`now()`,
        },
      })
      .returning({ id: users.id });
    if (!user) throw new Error("bootstrap: user insert returned nothing");
    await tx.insert(platformRoleBindings).values({ userId: user.id, role: PLATFORM_ADMIN_ROLE });
    await recordAudit(tx, ctx, {
      action: "platform.bootstrapped",
      target: { type: "user", id: user.id },
      details: { email: parsed.email, role: PLATFORM_ADMIN_ROLE },
    });
    return { userId: user.id };
  });
}
