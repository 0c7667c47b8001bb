import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { sendEmailMessage } from "../../src/email/send-email.ts";
import type { TestHarness } from "./app.ts";
import type { TestSmtpServer } from "./smtp-server.ts";

/** The public base URL the mail tests give (`Server:PublicBaseUrl`): every link starts with it. */
export const MAIL_BASE_URL = "https://app.plinth.test";

/**
 * Sends every pending message to `to` as the `email.send` job would, reads them back from the real
 * SMTP server and returns the link each carries (work started in the background settled first).
 */
export async function deliverLinks(h: TestHarness, smtp: TestSmtpServer, to: string): Promise<string[]> {
  await h.deps.pending.settled(5_000);
  const rows = await execute<{ id: string }>(
    h.db,
    sql`select id from email_messages where recipient = ${to} and status = 'pending' order by created_at`,
  );
  const before = smtp.received.length;
  for (const row of rows) await sendEmailMessage(h.deps, { messageId: row.id });
  const got = (await smtp.waitFor(before + rows.length)).slice(before);
  return got.map((m) => {
    const link = new RegExp(`${MAIL_BASE_URL.replaceAll(".", "\\.")}/\\S+`).exec(m.mail.text ?? "")?.[0];
    if (!link) throw new Error("no link in the message");
    return link;
  });
}

/** The single-use token a mailed link carries. */
export const tokenOf = (link: string) => new URL(link).searchParams.get("token") ?? "";
