import { afterAll, beforeAll } from "bun:test";
import { sql } from "drizzle-orm";
import type { Clock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { sendEmailMessage } from "../../src/email/send-email.ts";
import { relaxedLimits, type TestHarness, useTestApp } from "./app.ts";
import { startSmtpServer, type TestSmtpServer } from "./smtp-server.ts";

/** The public base URL the mail tests give (`Server:PublicBaseUrl`): every link starts with it. */
export const MAIL_BASE_URL = "https://app.plinth.test";

/**
 * Sends every pending message to `to` as the `email.send` job would, reads them back from the real
 * SMTP server and returns the text of each (work started in the background settled first).
 */
export async function deliverTexts(h: TestHarness, smtp: TestSmtpServer, to: string): Promise<string[]> {
  await h.deps.pending.settled(5_000);
  const rows = await execute<{ id: string }>(
    h.db,
    sql`select id from email_messages where recipient = ${to} and status = 'pending' order by created_at`,
  );
  const before = smtp.received.length;
  for (const row of rows) await sendEmailMessage(h.deps, { messageId: row.id });
  const got = (await smtp.waitFor(before + rows.length)).slice(before);
  return got.map((m) => m.mail.text ?? "");
}

/** The link a message's text carries (`{MAIL_BASE_URL}/…?token=…`). */
export function linkIn(text: string): string {
  const link = new RegExp(`${MAIL_BASE_URL.replaceAll(".", "\\.")}/\\S+`).exec(text)?.[0];
  if (!link) throw new Error("no link in the message");
  return link;
}

/** `deliverTexts`, then the link each message carries. */
export async function deliverLinks(h: TestHarness, smtp: TestSmtpServer, to: string): Promise<string[]> {
  return (await deliverTexts(h, smtp, to)).map(linkIn);
}

/** The single-use token a mailed link carries. */
export const tokenOf = (link: string) => new URL(link).searchParams.get("token") ?? "";

/**
 * The set-up of a file that reads mail back: a real SMTP server (STARTTLS required) started before
 * the app, the app sending to it with `Server:PublicBaseUrl` = MAIL_BASE_URL and relaxed limits
 * (plus `settings`), and `deliverLinks` bound to both.
 */
export function useMailTestApp(options: { clock: Clock; settings?: Record<string, string> }) {
  let server: TestSmtpServer | undefined;
  beforeAll(async () => {
    server = await startSmtpServer({ requireTls: true });
  });
  afterAll(async () => {
    await server?.close();
  });
  const smtp = () => {
    if (!server) throw new Error("the SMTP server starts in beforeAll");
    return server;
  };
  const h = useTestApp({
    clock: options.clock,
    settings: () => ({
      ...relaxedLimits,
      ...smtp().settings(),
      "Server:PublicBaseUrl": MAIL_BASE_URL,
      ...options.settings,
    }),
  });
  return {
    h,
    smtp,
    deliverLinks: (to: string) => deliverLinks(h, smtp(), to),
    deliverTexts: (to: string) => deliverTexts(h, smtp(), to),
  };
}
