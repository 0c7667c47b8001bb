import { z } from "zod";
import type { Ctx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { emailMessages } from "../db/schema/email.ts";
import type { Deps } from "../deps.ts";
import { enqueue, enqueueContext } from "../jobs/enqueue.ts";
import { jobKind } from "../jobs/registry.ts";
import { EMAIL_TEMPLATES, type EmailData, type EmailTemplateName } from "./templates.ts";

export const SEND_EMAIL_KIND = "email.send";
/**
 * The outbox row and its tenant only (the scope the worker reads it in): no address, no content,
 * no link goes into a job payload. `tenantId` is absent from jobs enqueued before it was added.
 */
export const sendEmailPayload = z.object({ messageId: z.uuid(), tenantId: z.uuid().nullable().optional() });
/** The job kind of one message; its handler is `sendEmailWorker` (src/email/send-email.ts). */
export const sendEmailJob = jobKind(SEND_EMAIL_KIND, sendEmailPayload);

/** The data protection purpose a message's values are sealed under. */
export const EMAIL_DATA_PURPOSE = "email-message";

export const emailDedupKey = (messageId: string) => `email:${messageId}`;

export type EmailDeps = Pick<Deps, "database" | "clock" | "dataProtection" | "config">;

export interface EnqueueEmailInput {
  /** The tenant the message is about (its provider sends it); null for platform staff. */
  tenantId: string | null;
  to: string;
  template: EmailTemplateName;
  /** A language tag (`en`, `de-AT`); default `Email:DefaultLocale`. */
  locale?: string;
  /** The template's values (EMAIL_TEMPLATES lists them), the one-time link among them. */
  data: EmailData;
}

/** An address a message may go to: one mailbox, no header injection. */
const ADDRESS = /^[^\s@<>()",;:\\]+@[^\s@<>()",;:\\]+\.[^\s@<>()",;:\\]+$/;

/**
 * Puts a message in the outbox in the ctx's transaction — the transaction of the change that
 * causes it, so the message exists exactly when the change committed — and enqueues its
 * `email.send` job there too. The worker renders and sends it (src/email/send-email.ts). The
 * values are sealed with data protection: a one-time link is a secret at rest too.
 */
export async function enqueueEmail(
  deps: EmailDeps,
  ctx: Ctx,
  input: EnqueueEmailInput,
): Promise<{ id: string }> {
  const to = input.to.trim().toLowerCase();
  if (!ADDRESS.test(to) || to.length > 320) throw new Error("enqueueEmail: the address is not one mailbox");
  const fields: readonly string[] = EMAIL_TEMPLATES[input.template]?.fields ?? [];
  if (fields.length === 0) throw new Error(`enqueueEmail: unknown template "${input.template}"`);
  const missing = fields.filter((f) => input.data[f] === undefined);
  if (missing.length > 0)
    throw new Error(`enqueueEmail: template "${input.template}" needs ${missing.join(", ")}`);
  const settings = deps.config.settings;
  const sealedData = await deps.dataProtection
    .forPurpose(EMAIL_DATA_PURPOSE)
    .protect(JSON.stringify(input.data));
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx) => {
    const [row] = await tx
      .insert(emailMessages)
      .values({
        tenantId: input.tenantId,
        recipient: to,
        template: input.template,
        locale: input.locale ?? settings.Email.DefaultLocale,
        sealedData,
        createdAt: now,
        updatedAt: now,
      })
      .returning({ id: emailMessages.id });
    if (!row) throw new Error("the e-mail outbox insert returned no row");
    await enqueue(
      tx,
      enqueueContext({ clock: deps.clock, config: { settings } }),
      sendEmailJob,
      { messageId: row.id, tenantId: input.tenantId },
      { tenantId: input.tenantId, dedupKey: emailDedupKey(row.id), maxAttempts: settings.Email.MaxAttempts },
    );
    return { id: row.id };
  });
}
