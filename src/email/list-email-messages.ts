import { desc, eq } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import { emailMessages } from "../db/schema/email.ts";
import { tenants } from "../db/schema/tenants.ts";
import { AppError } from "../errors.ts";
import { EMAIL_DATA_PURPOSE } from "./enqueue-email.ts";
import type { SendEmailDeps } from "./send-email.ts";
import { emailMessageId, senderContext } from "./send-email.ts";
import { type EmailData, type EmailTemplateName, type RenderedEmail, renderEmail } from "./templates.ts";

/** An outbox row as the Development console lists it. */
export interface EmailMessageSummary {
  id: string;
  tenantId: string | null;
  tenantName: string | null;
  to: string;
  template: string;
  locale: string;
  status: string;
  attempts: number;
  provider: string | null;
  lastError: string | null;
  createdAt: Date;
  sentAt: Date | null;
}

const summaryColumns = {
  id: emailMessages.id,
  tenantId: emailMessages.tenantId,
  tenantName: tenants.name,
  to: emailMessages.recipient,
  template: emailMessages.template,
  locale: emailMessages.locale,
  status: emailMessages.status,
  attempts: emailMessages.attempts,
  provider: emailMessages.provider,
  lastError: emailMessages.lastError,
  createdAt: emailMessages.createdAt,
  sentAt: emailMessages.sentAt,
};

/** Development only: the e-mail outbox would otherwise show other people's links. */
function developmentOnly(deps: Pick<SendEmailDeps, "config">): void {
  if (deps.config.environment !== "Development") throw new AppError("not_found", "No such resource.");
}

/** The newest `limit` messages of every tenant (the Development console's outbox), on the platform path. */
export async function listEmailMessages(
  deps: SendEmailDeps,
  ctx: Ctx,
  input: { limit: number },
): Promise<EmailMessageSummary[]> {
  developmentOnly(deps);
  return withPlatformDatabase(deps, ctx, (db) =>
    db
      .select(summaryColumns)
      .from(emailMessages)
      .leftJoin(tenants, eq(tenants.id, emailMessages.tenantId))
      .orderBy(desc(emailMessages.createdAt), desc(emailMessages.id))
      .limit(input.limit),
  );
}

/** One message rendered as it was (or will be) sent, link included (Development console only). */
export async function getEmailPreview(
  deps: SendEmailDeps,
  ctx: Ctx,
  input: { id: string },
): Promise<EmailMessageSummary & { rendered: RenderedEmail | null; messageId: string }> {
  developmentOnly(deps);
  const [row] = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({ ...summaryColumns, sealedData: emailMessages.sealedData })
      .from(emailMessages)
      .leftJoin(tenants, eq(tenants.id, emailMessages.tenantId))
      .where(eq(emailMessages.id, input.id))
      .limit(1),
  );
  if (!row) throw new AppError("not_found", "No such message.");
  const { sealedData, ...summary } = row;
  const settings = deps.config.settings;
  let rendered: RenderedEmail | null = null;
  if (sealedData) {
    const data = JSON.parse(
      await deps.dataProtection.forPurpose(EMAIL_DATA_PURPOSE).unprotect(sealedData),
    ) as EmailData;
    const sender = await withPlatformDatabase(deps, ctx, (db) => senderContext(db, row.tenantId, settings));
    rendered = renderEmail(
      row.template as EmailTemplateName,
      row.locale,
      { ...sender, ...data },
      { directory: settings.Email.TemplatesDirectory, defaultLocale: settings.Email.DefaultLocale },
    );
  }
  return { ...summary, rendered, messageId: emailMessageId(row.id, settings.Email.From) };
}
