import { randomInt } from "node:crypto";
import { and, count, eq, isNull } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import { backupCodes, users } from "../db/schema/index.ts";
import { enqueueEmail } from "../email/enqueue-email.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import type { AuthDeps } from "./deps.ts";
import { tokenHash } from "./opaque-tokens.ts";

/** Codes in a set: shown once when made, each usable once. */
export const BACKUP_CODE_COUNT = 10;
/** Crockford's Base32 (no i, l, o, u): 12 characters are 60 random bits. */
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
const CODE_LENGTH = 12;

/** A code as typed: case, spaces and dashes do not matter, and o/i/l read as 0/1/1. */
export function normaliseBackupCode(code: string): string {
  return code.toLowerCase().replace(/[\s-]/g, "").replace(/o/g, "0").replace(/[il]/g, "1");
}

/** Stored form: SHA-256 bound to the user (a code copied to another account's rows matches nothing). */
const backupCodeHash = (userId: string, code: string) => tokenHash(`${userId}:${normaliseBackupCode(code)}`);

function newBackupCode(): string {
  let code = "";
  for (let i = 0; i < CODE_LENGTH; i++) code += ALPHABET[randomInt(ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4, 8)}-${code.slice(8)}`;
}

/**
 * Replaces the user's backup codes with a fresh set of ten, on `tx`: the only time they are seen in
 * clear is the answer that returns them.
 */
export async function replaceBackupCodes(tx: Executor, userId: string, now: Date): Promise<string[]> {
  const codes = Array.from({ length: BACKUP_CODE_COUNT }, newBackupCode);
  await tx.delete(backupCodes).where(eq(backupCodes.userId, userId));
  await tx
    .insert(backupCodes)
    .values(codes.map((code) => ({ userId, codeHash: backupCodeHash(userId, code), createdAt: now })));
  return codes;
}

/** How many unused backup codes the user has. */
export async function backupCodesLeft(db: Executor, userId: string): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(backupCodes)
    .where(and(eq(backupCodes.userId, userId), isNull(backupCodes.usedAt)));
  return row?.n ?? 0;
}

/**
 * Spends one backup code of the user (one conditional update: of two uses at once one wins) and,
 * on the same transaction, records `mfa.backup_code_used`, e-mails the user a notice and emits the
 * tenant's `mfa.backup_code_used` event. False when the code is not one of theirs or already used.
 */
export async function useBackupCode(
  deps: AuthDeps,
  ctx: Ctx & { tx: Tx },
  input: { userId: string; code: string },
): Promise<boolean> {
  const { tx } = ctx;
  const now = deps.clock.now();
  const [spent] = await tx
    .update(backupCodes)
    .set({ usedAt: now })
    .where(
      and(
        eq(backupCodes.userId, input.userId),
        eq(backupCodes.codeHash, backupCodeHash(input.userId, input.code)),
        isNull(backupCodes.usedAt),
      ),
    )
    .returning({ id: backupCodes.id });
  if (!spent) return false;
  const remaining = await backupCodesLeft(tx, input.userId);
  await recordAudit(tx, ctx, {
    action: "mfa.backup_code_used",
    target: { type: "user", id: input.userId },
    details: { remaining },
  });
  const [user] = await tx
    .select({ email: users.email, name: users.name })
    .from(users)
    .where(eq(users.id, input.userId));
  if (user)
    await enqueueEmail(deps, ctx, {
      tenantId: ctx.tenantId,
      to: user.email,
      template: "mfa-backup-code-used",
      data: { name: user.name || user.email, remaining },
    });
  if (ctx.tenantId)
    await emitEvent(tx, enqueueContext(deps), {
      tenantId: ctx.tenantId,
      type: "mfa.backup_code_used",
      data: { userId: input.userId, remaining },
    });
  return true;
}
