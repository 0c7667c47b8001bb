import { rootCertificates } from "node:tls";
import nodemailer from "nodemailer";
import type { Logger } from "../telemetry/logger.ts";
import { redactLinks, redactValues } from "./templates.ts";

/** One rendered message as a provider takes it. */
export interface OutgoingEmail {
  /** The RFC 5322 Message-ID (`<…@…>`): the same on every attempt of one message. */
  messageId: string;
  from: string;
  to: string;
  subject: string;
  text: string;
  html: string;
  /** The values a log line must not show besides the link's token (a sign-in code). */
  secrets?: readonly string[];
  /** Which message and template, for log lines (never the content). */
  outboxId: string;
  template: string;
  tenantId: string | null;
}

/** What a provider answered: its name and its reply (the SMTP 250 line, the HTTP status). */
export interface SentEmail {
  provider: "smtp" | "http" | "development";
  response: string;
}

/** A provider of outgoing mail; throws `EmailDeliveryError` when the message was not taken. */
export interface EmailSender {
  send(message: OutgoingEmail, options?: { signal?: AbortSignal }): Promise<SentEmail>;
}

/** What every provider is handed of a message: its id, the envelope and the two bodies (no secrets, no log fields). */
function messageParts({ messageId, from, to, subject, text, html }: OutgoingEmail) {
  return { messageId, from, to, subject, text, html };
}

export class EmailDeliveryError extends Error {
  override name = "EmailDeliveryError";
}

/** The sender of one provider row (a tenant's own) or of the platform default, and its `From`. */
export interface EmailProviderChoice {
  sender: EmailSender;
  /** Overrides `Email:From` (a tenant sending from its own domain). */
  from?: string;
}

export interface SmtpOptions {
  host: string;
  port?: number;
  security: "none" | "starttls" | "tls";
  username?: string;
  password?: string;
  /** CA certificates trusted beside the system roots. */
  trustedCa?: string[];
  timeoutMs: number;
}

const defaultPort = (security: SmtpOptions["security"]) =>
  security === "tls" ? 465 : security === "starttls" ? 587 : 25;

/**
 * SMTP through nodemailer: STARTTLS required (`starttls`), TLS from the start (`tls`) or plain
 * (`none`, which never upgrades), AUTH when a user name is set. One connection per message: sends
 * are rare, and a pooled connection would outlive the job that opened it.
 */
export function smtpSender(options: SmtpOptions): EmailSender {
  const transport = nodemailer.createTransport({
    host: options.host,
    port: options.port ?? defaultPort(options.security),
    secure: options.security === "tls",
    requireTLS: options.security === "starttls",
    ignoreTLS: options.security === "none",
    auth: options.username ? { user: options.username, pass: options.password ?? "" } : undefined,
    connectionTimeout: options.timeoutMs,
    greetingTimeout: options.timeoutMs,
    socketTimeout: options.timeoutMs,
    tls: options.trustedCa ? { ca: [...rootCertificates, ...options.trustedCa] } : undefined,
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  return {
    send: async (message, { signal } = {}) => {
      signal?.throwIfAborted();
      try {
        const info = await transport.sendMail({
          ...messageParts(message),
          headers: { "Auto-Submitted": "auto-generated" },
        });
        if (info.accepted.length === 0) throw new EmailDeliveryError("the SMTP server accepted no recipient");
        return { provider: "smtp", response: String(info.response ?? "").slice(0, 200) };
      } catch (error) {
        if (error instanceof EmailDeliveryError) throw error;
        const e = error as { code?: string; responseCode?: number; name?: string };
        throw new EmailDeliveryError(
          `SMTP send failed: ${e.code ?? e.name ?? "error"}${e.responseCode ? ` ${e.responseCode}` : ""}`,
        );
      }
    },
  };
}

/**
 * An HTTP e-mail API: `POST <url>` with the message as JSON, the key as a Bearer token and
 * `Idempotency-Key: <Message-ID>`, so an API that honours it sends a retried message once; any
 * 2xx is accepted, no redirects.
 */
export function httpEmailSender(input: {
  url: string;
  apiKey: string;
  fetch?: typeof fetch;
  timeoutMs: number;
}): EmailSender {
  const doFetch = input.fetch ?? fetch;
  return {
    send: async (message, { signal } = {}) => {
      let response: Response;
      try {
        response = await doFetch(input.url, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${input.apiKey}`,
            "idempotency-key": message.messageId,
          },
          body: JSON.stringify(messageParts(message)),
          redirect: "manual",
          signal: signal
            ? AbortSignal.any([signal, AbortSignal.timeout(input.timeoutMs)])
            : AbortSignal.timeout(input.timeoutMs),
        });
      } catch (error) {
        throw new EmailDeliveryError(`e-mail API unreachable: ${(error as Error).name}`);
      }
      await response.body?.cancel();
      if (!response.ok) throw new EmailDeliveryError(`e-mail API answered ${response.status}`);
      return { provider: "http", response: String(response.status) };
    },
  };
}

/**
 * Development without a provider: nothing leaves the process. The message is logged with every
 * one-time link's token redacted (the console's outbox shows it whole, in Development only).
 */
export function developmentEmailSender(logger: Logger): EmailSender {
  return {
    send: async (message) => {
      logger.info("e-mail not sent (development provider): see /console/outbox", {
        outboxId: message.outboxId,
        template: message.template,
        tenantId: message.tenantId,
        to: message.to,
        subject: message.subject,
        text: redactValues(redactLinks(message.text), message.secrets ?? []),
      });
      return { provider: "development", response: "logged" };
    },
  };
}

/** Outside Development with no provider: every message fails (and ends dead), loudly. */
export const noEmailSender: EmailSender = {
  send: async () => {
    throw new EmailDeliveryError("no e-mail provider is configured (Email:Smtp:Host or Email:Http:Url)");
  },
};
