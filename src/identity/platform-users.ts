import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { type DatabaseDeps, withPlatformTransaction } from "../db/operation.ts";
import { platformRoleBindings, users } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { hashPassword, MIN_PASSWORD_LENGTH, passwordProblem } from "../security/passwords.ts";
import { platformRoleNames } from "./roles.ts";

export const newPlatformUserSchema = z.object({
  email: z.email().max(320),
  name: z.string().trim().min(1).max(200),
  password: z.string().min(MIN_PASSWORD_LENGTH).max(1024),
  role: z.enum(platformRoleNames),
});
export type NewPlatformUser = z.input<typeof newPlatformUserSchema>;

/**
 * A platform administrator adds platform staff (no tenant) with one platform role — how a
 * `platform_viewer` is granted. The password is someone else's choice, so it must be changed at
 * first sign-in, like the bootstrap administrator's. 409 when the e-mail is taken among staff.
 */
export async function createPlatformUser(
  deps: DatabaseDeps & Pick<Deps, "logger">,
  ctx: Ctx,
  input: NewPlatformUser,
): Promise<{ id: string }> {
  const user = newPlatformUserSchema.parse(input);
  const weakness = await passwordProblem(user.password, { email: user.email, name: user.name });
  if (weakness)
    throw new AppError("validation_failed", "The request is not valid.", {
      fields: [{ path: "password", message: weakness }],
    });
  const passwordHash = await hashPassword(user.password);
  // a platform user and its role binding: the platform path
  const created = await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const [row] = await tx
      .insert(users)
      .values({
        tenantId: null,
        pool: "platform",
        email: user.email.toLowerCase(),
        name: user.name,
        passwordHash,
        mustChangePassword: true,
      })
      .onConflictDoNothing()
      .returning({ id: users.id });
    if (!row) throw new AppError("conflict", "A platform user with this e-mail exists.");
    await tx.insert(platformRoleBindings).values({ userId: row.id, role: user.role });
    await recordAudit(tx, ctx, {
      action: "platform_user.created",
      target: { type: "user", id: row.id },
      details: { email: user.email.toLowerCase(), role: user.role },
      tenantId: null,
    });
    return row;
  });
  deps.logger.info("admin action", {
    action: "platform_user.created",
    actorId: ctx.actor.type === "user" ? ctx.actor.userId : null,
    requestId: ctx.requestId,
    targetId: created.id,
    role: user.role,
  });
  return created;
}
