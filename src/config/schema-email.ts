import { z } from "zod";
import { int, secret } from "./schema-fields.ts";

/** `Email`: the platform's default e-mail provider and the templates (docs/email.md). */
export const emailSection = z.object({
  Provider: z.enum(["smtp", "http", "development"]).optional().meta({
    description:
      "The platform default provider (a tenant's own `notification` provider overrides it). Unset: `smtp` when `Email:Smtp:Host` is set, `http` when `Email:Http:Url` is, else `development` (messages go to the log, links redacted, and to the console's outbox; outside Development nothing is sent and the message fails).",
  }),
  From: z
    .string()
    .min(3)
    .max(320)
    .default("Plinth <no-reply@localhost>")
    .meta({ description: "The sender (`Name <address>` or an address) of platform messages." }),
  TemplatesDirectory: z.string().min(1).optional().meta({
    description:
      "A directory of templates that override the built-in ones: `<locale>/<template>.subject.txt`, `.txt` and `.html` (any of the three; docs/email.md).",
  }),
  DefaultLocale: z
    .string()
    .regex(/^[a-z]{2}(-[A-Z]{2})?$/, "a language tag such as `en` or `de-AT`")
    .default("en")
    .meta({
      description: "The locale of a message enqueued without one, and the fallback of a missing one.",
    }),
  TimeoutSeconds: int(1, 30, "Time limit of one send (connect, TLS, the SMTP dialogue or the HTTP call)."),
  MaxAttempts: int(
    1,
    8,
    "Send attempts of a message before it is dead (the job engine's backoff between them).",
  ),
  RetentionDays: int(
    1,
    30,
    "Days a sent or failed message stays in the outbox (`email_messages`) before the daily `email.prune` job deletes it; its `email.send` job goes with the job retention (`BackgroundProcessing:JobRetentionDays`).",
  ),
  Smtp: z.object({
    Host: z.string().min(1).optional().meta({ description: "SMTP server host name." }),
    Port: z
      .number()
      .int()
      .min(1)
      .max(65_535)
      .optional()
      .meta({ description: "SMTP port; default 587 (`starttls`), 465 (`tls`), 25 (`none`)." }),
    Security: z.enum(["none", "starttls", "tls"]).default("starttls").meta({
      description:
        "`starttls`: plain connection upgraded with STARTTLS, refused when the server does not offer it; `tls`: TLS from the first byte (port 465); `none`: no TLS (local relays only).",
    }),
    Username: z.string().min(1).optional().meta({ description: "SMTP AUTH user name." }),
    Password: z
      .string()
      .min(1)
      .optional()
      .meta(secret("SMTP AUTH password (`Email__Smtp__Password_FILE` reads it from a file).")),
    TrustedCaFile: z.string().min(1).optional().meta({
      description:
        "A PEM file of CA certificates trusted beside the system roots for the SMTP server's certificate (a private relay).",
    }),
  }),
  Http: z.object({
    Url: z
      .url({ protocol: /^https?$/ })
      .optional()
      .meta({
        description:
          "An HTTP e-mail API: `POST <url>` with `{ messageId, from, to, subject, text, html }` as JSON, `Idempotency-Key: <messageId>`; any 2xx is accepted.",
      }),
    ApiKey: z.string().min(1).optional().meta(secret("Bearer token of the HTTP e-mail API.")),
  }),
});
