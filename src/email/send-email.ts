import { sql } from "drizzle-orm";
import type { z } from "zod";
import { type Ctx, systemCtx } from "../context.ts";
import { type Executor, execute, type Tx } from "../db/client.ts";
import { withPlatformTransaction, withTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { type JobContext, jobWorker } from "../jobs/registry.ts";
import { EMAIL_DATA_PURPOSE, type EmailDeps, sendEmailJob, type sendEmailPayload } from "./enqueue-email.ts";
import { publicBaseUrl } from "./links.ts";
import { EmailDeliveryError, type OutgoingEmail } from "./senders.ts";
import { type EmailData, type EmailTemplateName, renderEmail, secretFieldsOf } from "./templates.ts";

export type SendEmailDeps = EmailDeps & Pick<Deps, "logger" | "redactor" | "emailProviders">;

interface MessageRow {
  id: string;
  tenant_id: string | null;
  recipient: string;
  template: string;
  locale: string;
  sealed_data: string | null;
  status: string;
  attempts: number;
  last_error: string | null;
}

/** Another run holds the message (it is being sent right now): this run tries again later. */
export class EmailBusyError extends Error {
  override name = "EmailBusyError";
}

/**
 * Runs `work` in the message's scope: its tenant's (row-level security, docs/architecture.md), or
 * the platform's for a message of platform staff and for a job enqueued without its tenant.
 */
function inMessageScope<T>(
  deps: SendEmailDeps,
  tenantId: string | null | undefined,
  work: (tx: Tx, ctx: Ctx) => Promise<T>,
): Promise<T> {
  return tenantId
    ? withTransaction(deps, systemCtx("email", tenantId), work)
    : withPlatformTransaction(deps, systemCtx("email"), work);
}

/** The address part of `Name <a@b>` or `a@b`. */
const addressOf = (from: string) => /<([^>]+)>/.exec(from)?.[1] ?? from;
/** The display name of `Name <a@b>`, or null. */
const displayNameOf = (from: string) => /^\s*"?([^"<]+?)"?\s*</.exec(from)?.[1] ?? null;

/** The RFC 5322 Message-ID of an outbox row: the same on every attempt, so a duplicate is recognisable. */
export const emailMessageId = (id: string, from: string) =>
  `<${id}@${addressOf(from).split("@")[1] ?? "localhost"}>`;

/** The tenant's name and host (its Active custom domain, else the public host); the platform's for staff. */
export async function senderContext(
  db: Executor,
  tenantId: string | null,
  settings: SendEmailDeps["config"]["settings"],
) {
  const platformHost = new URL(publicBaseUrl(settings)).host;
  if (!tenantId)
    return { tenantName: displayNameOf(settings.Email.From) ?? platformHost, tenantHost: platformHost };
  const [row] = await execute<{ name: string; host: string | null }>(
    db,
    sql`select t.name,
               (select d.hostname from tenant_domains d
                where d.tenant_id = t.id and d.status = 'Active' order by d.created_at limit 1) as host
        from tenants t where t.id = ${tenantId}`,
  );
  return { tenantName: row?.name ?? platformHost, tenantHost: row?.host ?? platformHost };
}

/**
 * Sends one outbox message (the `email.send` job), exactly once as far as the provider's answer
 * can tell: the attempt is counted first (committed), then, in one transaction holding the row
 * (`FOR UPDATE`, so no second run sends it meanwhile), the message is rendered, handed to the
 * provider and marked sent; the mark commits right after the provider's acceptance (SMTP 250). A
 * run that dies before the acceptance leaves the row pending and unlocked: the job runs again
 * after its lease and sends it then. A run that dies between the acceptance and the commit (a
 * window of one UPDATE and COMMIT) makes the next run send it again, with the same Message-ID:
 * docs/email.md, "Exactly once". A failed send records its error; the last attempt marks it failed.
 */
export async function sendEmailMessage(
  deps: SendEmailDeps,
  payload: z.output<typeof sendEmailPayload>,
  job?: Pick<JobContext, "signal" | "attempt" | "maxAttempts">,
): Promise<"sent" | "skipped"> {
  const started = await inMessageScope(deps, payload.tenantId, (db) =>
    execute<MessageRow>(
      db,
      sql`update email_messages set attempts = attempts + 1, updated_at = ${deps.clock.now().toISOString()}::timestamptz
          where id = (select id from email_messages where id = ${payload.messageId} and status = 'pending'
                      for update skip locked)
          returning id, tenant_id, recipient, template, locale, sealed_data, status, attempts, last_error`,
    ),
  );
  const first = started[0];
  if (!first) return skipOrWait(deps, payload);
  if (first.attempts > 1 && first.last_error === null)
    deps.logger.warn(
      "e-mail sent again after an interrupted attempt (the recipient may get it twice, same Message-ID)",
      {
        outboxId: first.id,
        attempts: first.attempts,
      },
    );
  try {
    return await inMessageScope(deps, payload.tenantId, async (tx) => {
      const [row] = await execute<MessageRow>(
        tx,
        sql`select id, tenant_id, recipient, template, locale, sealed_data, status, attempts, last_error
            from email_messages where id = ${payload.messageId} and status = 'pending' for update skip locked`,
      );
      if (!row) return "skipped";
      const message = await outgoing(deps, tx, row);
      const choice = await deps.emailProviders.choose(row.tenant_id);
      const sent = await choice.sender.send(
        { ...message, from: choice.from ?? message.from },
        { signal: job?.signal },
      );
      const keep = deps.config.environment === "Development";
      await execute(
        tx,
        sql`update email_messages
            set status = 'sent', sent_at = ${deps.clock.now().toISOString()}::timestamptz, provider = ${sent.provider},
                provider_response = ${sent.response}, last_error = null,
                sealed_data = ${keep ? sql`sealed_data` : sql`null`}, updated_at = ${deps.clock.now().toISOString()}::timestamptz
            where id = ${row.id}`,
      );
      deps.logger.info("e-mail sent", { outboxId: row.id, template: row.template, provider: sent.provider });
      return "sent" as const;
    });
  } catch (error) {
    await recordFailure(deps, payload, error, job);
    throw error;
  }
}

/** The row was not claimable: finished (skip), or held by a run sending it right now (try later). */
async function skipOrWait(
  deps: SendEmailDeps,
  payload: z.output<typeof sendEmailPayload>,
): Promise<"skipped"> {
  const [row] = await inMessageScope(deps, payload.tenantId, (db) =>
    execute<{ status: string }>(db, sql`select status from email_messages where id = ${payload.messageId}`),
  );
  if (row?.status === "pending") throw new EmailBusyError("the message is being sent by another run");
  return "skipped";
}

/** The rendered message of a row: its sealed values opened, the tenant's name and host added. */
async function outgoing(deps: SendEmailDeps, tx: Executor, row: MessageRow): Promise<OutgoingEmail> {
  if (!row.sealed_data) throw new Error("the message has no data left to render");
  const data = JSON.parse(
    await deps.dataProtection.forPurpose(EMAIL_DATA_PURPOSE).unprotect(row.sealed_data),
  ) as EmailData;
  const settings = deps.config.settings;
  const values = { ...(await senderContext(tx, row.tenant_id, settings)), ...data };
  const rendered = renderEmail(row.template as EmailTemplateName, row.locale, values, {
    directory: settings.Email.TemplatesDirectory,
    defaultLocale: settings.Email.DefaultLocale,
  });
  return {
    messageId: emailMessageId(row.id, settings.Email.From),
    from: settings.Email.From,
    to: row.recipient,
    subject: rendered.subject,
    text: rendered.text,
    html: rendered.html,
    secrets: secretFieldsOf(row.template as EmailTemplateName).map((field) => String(data[field] ?? "")),
    outboxId: row.id,
    template: row.template,
    tenantId: row.tenant_id,
  };
}

async function recordFailure(
  deps: SendEmailDeps,
  payload: z.output<typeof sendEmailPayload>,
  error: unknown,
  job: Pick<JobContext, "attempt" | "maxAttempts"> | undefined,
): Promise<void> {
  if (error instanceof EmailBusyError) return;
  const reason =
    error instanceof EmailDeliveryError
      ? error.message
      : deps.redactor.text(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  const last = job !== undefined && job.attempt >= job.maxAttempts;
  await inMessageScope(deps, payload.tenantId, (db) =>
    execute(
      db,
      sql`update email_messages
          set last_error = ${reason.slice(0, 500)}, status = ${last ? "failed" : "pending"},
              updated_at = ${deps.clock.now().toISOString()}::timestamptz
          where id = ${payload.messageId} and status = 'pending'`,
    ),
  );
  deps.logger.warn(last ? "e-mail failed for good (dead)" : "e-mail send failed: will retry", {
    outboxId: payload.messageId,
    error: reason,
  });
}

/** The `email.send` worker, registered by every process that runs the job loop. */
export const sendEmailWorker = jobWorker(sendEmailJob, (deps: SendEmailDeps, payload, context) =>
  sendEmailMessage(deps, payload, context),
);

/** The e-mail area's job workers, for `JobRegistry.add`. */
export const emailJobs = [sendEmailWorker];
