import { readFileSync } from "node:fs";
import { join } from "node:path";

/** A message's three parts, each with `{{name}}` placeholders. */
export interface EmailTemplate {
  subject: string;
  text: string;
  html: string;
}

/**
 * The templates Plinth sends and the values each needs from its caller (`data`). Every template
 * also gets `tenantName` and `tenantHost` (the tenant the message is about, or the platform's
 * name and host for platform staff) and `expiresInMinutes` where the caller gives it. `link` is
 * the one secret a message may carry (with the sign-in code beside the sign-in link, listed in
 * `secrets`): both are redacted in every log line.
 */
export const EMAIL_TEMPLATES = {
  "password-reset": { fields: ["name", "link", "expiresInMinutes"] },
  "email-verification": { fields: ["name", "link", "expiresInMinutes"] },
  invitation: { fields: ["inviterName", "role", "link", "expiresInMinutes"] },
  "sign-up-verification": { fields: ["name", "link", "expiresInMinutes"] },
  "sign-in-link": { fields: ["name", "code", "link", "expiresInMinutes"], secrets: ["code"] },
  "mfa-backup-code-used": { fields: ["name", "remaining"] },
  "mfa-reset": { fields: ["name"] },
  "email-change": { fields: ["name", "link", "expiresInMinutes"] },
  "email-change-notice": { fields: ["name", "newEmail"] },
} as const satisfies Record<string, { fields: readonly string[]; secrets?: readonly string[] }>;

/** The values besides the link that a message's log line never shows (a sign-in code). */
export function secretFieldsOf(name: EmailTemplateName): readonly string[] {
  const template = EMAIL_TEMPLATES[name];
  return "secrets" in template ? template.secrets : [];
}

export type EmailTemplateName = keyof typeof EMAIL_TEMPLATES;
export const emailTemplateNames = Object.keys(EMAIL_TEMPLATES) as EmailTemplateName[];

/** Values a template reads; strings and numbers only (rendered as text, HTML-escaped in the HTML part). */
export type EmailData = Record<string, string | number>;

const htmlPage = (body: string) =>
  `<!doctype html><html><body style="font-family:sans-serif;line-height:1.5">${body}<p style="color:#666;font-size:small">{{tenantName}} · {{tenantHost}}</p></body></html>`;

const button = `<p><a href="{{link}}" style="display:inline-block;padding:8px 16px;background:#1f6feb;color:#fff;text-decoration:none;border-radius:4px">`;

/** A change of address: the link to the new address, the notice to the current one (English only). */
const EMAIL_CHANGE: Record<string, EmailTemplate> = {
  en: {
    subject: "Confirm your new e-mail address for {{tenantName}}",
    text: "Hello {{name}},\n\nopen this link within {{expiresInMinutes}} minutes to make this address the one of your {{tenantName}} account:\n\n{{link}}\n\nThe link works once. Until you open it, your account keeps its current address. If you did not ask for this, ignore this message.\n\n{{tenantName}} · {{tenantHost}}\n",
    html: htmlPage(
      `<p>Hello {{name}},</p><p>open this link within {{expiresInMinutes}} minutes to make this address the one of your {{tenantName}} account:</p>${button}Confirm my new address</a></p><p>The link works once. Until you open it, your account keeps its current address. If you did not ask for this, ignore this message.</p>`,
    ),
  },
};

const EMAIL_CHANGE_NOTICE: Record<string, EmailTemplate> = {
  en: {
    subject: "A change of your {{tenantName}} e-mail address was requested",
    text: "Hello {{name}},\n\nsomeone signed in to your {{tenantName}} account asked to change its address to {{newEmail}}. Nothing changes until the new address is confirmed with the link sent to it.\n\nIf this was not you, change your password now and end your other sessions.\n\n{{tenantName}} · {{tenantHost}}\n",
    html: htmlPage(
      `<p>Hello {{name}},</p><p>someone signed in to your {{tenantName}} account asked to change its address to {{newEmail}}. Nothing changes until the new address is confirmed with the link sent to it.</p><p>If this was not you, change your password now and end your other sessions.</p>`,
    ),
  },
};

/** Plinth's own wording, per template and locale; a deployment overrides any part (Email:TemplatesDirectory). */
const BUILT_IN: Record<EmailTemplateName, Record<string, EmailTemplate>> = {
  "email-change": EMAIL_CHANGE,
  "email-change-notice": EMAIL_CHANGE_NOTICE,
  "password-reset": {
    en: {
      subject: "Reset your {{tenantName}} password",
      text: "Hello {{name}},\n\nsomeone (we hope you) asked to reset the password of your {{tenantName}} account. Open this link within {{expiresInMinutes}} minutes to choose a new one:\n\n{{link}}\n\nThe link works once. If you did not ask for this, ignore this message: your password stays as it is.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        `<p>Hello {{name}},</p><p>someone (we hope you) asked to reset the password of your {{tenantName}} account. Open this link within {{expiresInMinutes}} minutes to choose a new one:</p>${button}Choose a new password</a></p><p>The link works once. If you did not ask for this, ignore this message: your password stays as it is.</p>`,
      ),
    },
    de: {
      subject: "Ihr Passwort für {{tenantName}} zurücksetzen",
      text: "Hallo {{name}},\n\njemand (hoffentlich Sie) möchte das Passwort Ihres Kontos bei {{tenantName}} zurücksetzen. Öffnen Sie diesen Link innerhalb von {{expiresInMinutes}} Minuten, um ein neues zu wählen:\n\n{{link}}\n\nDer Link funktioniert einmal. Wenn Sie das nicht angefordert haben, ignorieren Sie diese Nachricht: Ihr Passwort bleibt unverändert.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        `<p>Hallo {{name}},</p><p>jemand (hoffentlich Sie) möchte das Passwort Ihres Kontos bei {{tenantName}} zurücksetzen. Öffnen Sie diesen Link innerhalb von {{expiresInMinutes}} Minuten, um ein neues zu wählen:</p>${button}Neues Passwort wählen</a></p><p>Der Link funktioniert einmal. Wenn Sie das nicht angefordert haben, ignorieren Sie diese Nachricht.</p>`,
      ),
    },
  },
  "email-verification": {
    en: {
      subject: "Confirm your e-mail address for {{tenantName}}",
      text: "Hello {{name}},\n\nplease confirm that this address is yours by opening this link within {{expiresInMinutes}} minutes:\n\n{{link}}\n\nThe link works once. If you did not expect this, ignore this message.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        `<p>Hello {{name}},</p><p>please confirm that this address is yours by opening this link within {{expiresInMinutes}} minutes:</p>${button}Confirm my address</a></p><p>The link works once. If you did not expect this, ignore this message.</p>`,
      ),
    },
    de: {
      subject: "Bestätigen Sie Ihre E-Mail-Adresse für {{tenantName}}",
      text: "Hallo {{name}},\n\nbitte bestätigen Sie, dass diese Adresse Ihnen gehört, indem Sie diesen Link innerhalb von {{expiresInMinutes}} Minuten öffnen:\n\n{{link}}\n\nDer Link funktioniert einmal.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        `<p>Hallo {{name}},</p><p>bitte bestätigen Sie, dass diese Adresse Ihnen gehört, indem Sie diesen Link innerhalb von {{expiresInMinutes}} Minuten öffnen:</p>${button}Adresse bestätigen</a></p><p>Der Link funktioniert einmal.</p>`,
      ),
    },
  },
  invitation: {
    en: {
      subject: "{{inviterName}} invited you to {{tenantName}}",
      text: "Hello,\n\n{{inviterName}} invited you to join {{tenantName}} as {{role}}. Accept within {{expiresInMinutes}} minutes:\n\n{{link}}\n\nThe link works once. If you do not know {{tenantName}}, ignore this message.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        `<p>Hello,</p><p>{{inviterName}} invited you to join {{tenantName}} as {{role}}. Accept within {{expiresInMinutes}} minutes:</p>${button}Accept the invitation</a></p><p>The link works once. If you do not know {{tenantName}}, ignore this message.</p>`,
      ),
    },
  },
  "sign-up-verification": {
    en: {
      subject: "Confirm your address to create {{tenantName}}",
      text: "Hello {{name}},\n\nopen this link within {{expiresInMinutes}} minutes to confirm your address and create your workspace:\n\n{{link}}\n\nThe link works once. If you did not sign up, ignore this message.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        `<p>Hello {{name}},</p><p>open this link within {{expiresInMinutes}} minutes to confirm your address and create your workspace:</p>${button}Confirm and create</a></p><p>The link works once. If you did not sign up, ignore this message.</p>`,
      ),
    },
  },
  "sign-in-link": {
    en: {
      subject: "Your sign-in code for {{tenantName}}",
      text: "Hello {{name}},\n\nyour code to sign in to {{tenantName}} is {{code}}. Or open this link:\n\n{{link}}\n\nThe code and the link work once, within {{expiresInMinutes}} minutes; using one spends the other. If you did not ask for them, ignore this message.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        `<p>Hello {{name}},</p><p>your code to sign in to {{tenantName}} is <strong style="font-size:large;letter-spacing:2px">{{code}}</strong>. Or open this link:</p>${button}Sign in</a></p><p>The code and the link work once, within {{expiresInMinutes}} minutes; using one spends the other. If you did not ask for them, ignore this message.</p>`,
      ),
    },
  },
  "mfa-reset": {
    en: {
      subject: "Your second factors for {{tenantName}} were reset",
      text: "Hello {{name}},\n\nan administrator of {{tenantName}} removed your second factors (authenticator app, backup codes, passkeys). You now sign in with your password alone, or enrol a new factor when you next sign in.\n\nIf you did not ask for this, tell your administrator at once.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        "<p>Hello {{name}},</p><p>an administrator of {{tenantName}} removed your second factors (authenticator app, backup codes, passkeys). You now sign in with your password alone, or enrol a new factor when you next sign in.</p><p>If you did not ask for this, tell your administrator at once.</p>",
      ),
    },
  },
  "mfa-backup-code-used": {
    en: {
      subject: "A backup code was used to sign in to {{tenantName}}",
      text: "Hello {{name}},\n\none of your backup codes was just used in place of your authenticator. {{remaining}} unused codes are left.\n\nIf this was not you, change your password and replace your backup codes at once, and tell your administrator.\n\n{{tenantName}} · {{tenantHost}}\n",
      html: htmlPage(
        "<p>Hello {{name}},</p><p>one of your backup codes was just used in place of your authenticator. {{remaining}} unused codes are left.</p><p>If this was not you, change your password and replace your backup codes at once, and tell your administrator.</p>",
      ),
    },
  },
};

const PARTS = { subject: "subject.txt", text: "txt", html: "html" } as const;

/** A template's file in a deployment's directory, or null when it has none (or cannot read it). */
function overridePart(
  directory: string | undefined,
  locale: string,
  template: string,
  part: keyof typeof PARTS,
) {
  if (!directory) return null;
  try {
    return readFileSync(join(directory, locale, `${template}.${PARTS[part]}`), "utf8");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return null;
    throw error;
  }
}

/** The locales to try, best first: `de-AT` → `de-AT`, `de`, then the default. */
function localeChain(locale: string, fallback: string): string[] {
  const chain = [locale, locale.split("-")[0] ?? locale, fallback, fallback.split("-")[0] ?? fallback, "en"];
  return [...new Set(chain)];
}

/**
 * The template of `name` in the best locale available: each part from the deployment's directory
 * when it has that file, else Plinth's own. Read on every render, so an edited file applies to the
 * next message without a restart.
 */
export function loadTemplate(
  name: EmailTemplateName,
  locale: string,
  options: { directory?: string; defaultLocale: string },
): { template: EmailTemplate; locale: string } {
  for (const candidate of localeChain(locale, options.defaultLocale)) {
    const builtIn = BUILT_IN[name][candidate];
    const parts = {
      subject: overridePart(options.directory, candidate, name, "subject"),
      text: overridePart(options.directory, candidate, name, "text"),
      html: overridePart(options.directory, candidate, name, "html"),
    };
    if (!builtIn && parts.subject === null && parts.text === null && parts.html === null) continue;
    const part = (key: keyof EmailTemplate) => parts[key] ?? builtIn?.[key] ?? BUILT_IN[name].en?.[key] ?? "";
    return {
      template: { subject: part("subject").trim(), text: part("text"), html: part("html") },
      locale: candidate,
    };
  }
  throw new Error(`e-mail template "${name}" has no locale at all`);
}

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};
const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);

/** A template's placeholders filled in; one missing is an error naming it (a typo in an override). */
export function fill(template: string, values: EmailData, asHtml: boolean): string {
  return template.replace(/\{\{\s*([A-Za-z][A-Za-z0-9_]*)\s*\}\}/g, (_, key: string) => {
    const value = values[key];
    if (value === undefined)
      throw new Error(`the e-mail template uses {{${key}}}, which the message has no value for`);
    const text = String(value);
    return asHtml ? escapeHtml(text) : text;
  });
}

export interface RenderedEmail {
  subject: string;
  text: string;
  html: string;
  locale: string;
}

/** Renders a message: subject and text as plain text (a subject on one line), the HTML escaped. */
export function renderEmail(
  name: EmailTemplateName,
  locale: string,
  values: EmailData,
  options: { directory?: string; defaultLocale: string },
): RenderedEmail {
  const { template, locale: used } = loadTemplate(name, locale, options);
  return {
    subject: fill(template.subject, values, false).replace(/[\r\n]+/g, " "),
    text: fill(template.text, values, false),
    html: fill(template.html, values, true),
    locale: used,
  };
}

/** A one-time link's token replaced by `[REDACTED]`: how a message appears in a log line. */
export const redactLinks = (text: string): string =>
  text.replace(/([?&](?:token|code)=)[^&\s"'<>]+/gi, "$1[REDACTED]");

/** Every occurrence of each secret value (a sign-in code) replaced by `[REDACTED]`. */
export const redactValues = (text: string, secrets: readonly string[]): string =>
  secrets.reduce((out, secret) => (secret ? out.replaceAll(secret, "[REDACTED]") : out), text);
