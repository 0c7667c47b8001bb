import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { withTransaction } from "../../src/db/operation.ts";
import { enqueueEmail, SEND_EMAIL_KIND } from "../../src/email/enqueue-email.ts";
import { sendEmailMessage } from "../../src/email/send-email.ts";
import { putTenantProvider } from "../../src/providers/tenant-providers.ts";
import { putTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant, newMasterKey } from "../helpers/identity.ts";
import { startSmtpServer, type TestSmtpServer } from "../helpers/smtp-server.ts";

/**
 * E-mail delivery against a real SMTP server in this process (smtp-server: STARTTLS with a
 * certificate made now, AUTH), messages read back as MIME with mailparser.
 */

let smtp: TestSmtpServer;
let tenantSmtp: TestSmtpServer;
const templates = mkdtempSync(join(tmpdir(), "plinth-templates-"));
beforeAll(async () => {
  smtp = await startSmtpServer({ requireTls: true });
  tenantSmtp = await startSmtpServer({ requireTls: true, certificates: smtp.certificates });
  mkdirSync(join(templates, "fr"));
  writeFileSync(join(templates, "fr", "password-reset.subject.txt"), "Réinitialiser — {{tenantName}}\n");
  writeFileSync(join(templates, "fr", "password-reset.txt"), "Bonjour {{name}} : {{link}}\n");
});
afterAll(async () => {
  await tenantSmtp.close();
  await smtp.close();
  rmSync(templates, { recursive: true, force: true });
});

const h = useTestApp({
  settings: () => ({
    ...smtp.settings(),
    "Email:TemplatesDirectory": templates,
    "Server:PublicBaseUrl": "https://app.plinth.test",
    "Security:TenantSecrets:KeyId": "email-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  }),
});

const LINK = "https://app.plinth.test/auth/reset-password?token=secret-token-value-123";

async function messageRow(id: string) {
  const [row] = await execute<{
    status: string;
    attempts: number;
    sealed_data: string | null;
    provider: string;
  }>(h.db, sql`select status, attempts, sealed_data, provider from email_messages where id = ${id}`);
  return row;
}

test("a committed message is one job; the worker sends it once over STARTTLS with AUTH, text and HTML", async () => {
  const tenant = await createTenant(h.db);
  await execute(h.db, sql`update tenants set name = 'Acme <Widgets>' where id = ${tenant.id}`);
  const ctx = systemCtx("test", tenant.id);
  const { id } = await enqueueEmail(h.deps, ctx, {
    tenantId: tenant.id,
    to: "Ada@Example.com",
    template: "password-reset",
    data: { name: "Ada", link: LINK, expiresInMinutes: 30 },
  });
  const jobs = await execute<{ payload: unknown; dedup_key: string }>(
    h.db,
    sql`select payload, dedup_key from background_jobs where kind = ${SEND_EMAIL_KIND} and dedup_key = ${`email:${id}`}`,
  );
  expect(jobs.map((j) => j.payload)).toEqual([{ messageId: id, tenantId: tenant.id }]);
  // the link is sealed at rest: the row does not hold it in the clear
  const stored = await messageRow(id);
  expect(stored?.sealed_data).not.toContain("secret-token-value-123");

  // as the job runs it: in the tenant's scope (row-level security)
  expect(await sendEmailMessage(h.deps, { messageId: id, tenantId: tenant.id })).toBe("sent");
  expect(await sendEmailMessage(h.deps, { messageId: id, tenantId: tenant.id })).toBe("skipped");
  const [received] = await smtp.waitFor(1);
  expect(smtp.received).toHaveLength(1);
  expect(received?.secure).toBe(true);
  expect(received?.user).toBe(smtp.user);
  expect(received?.envelope.to).toEqual(["ada@example.com"]);
  const mail = received?.mail;
  expect(mail?.messageId).toBe(`<${id}@plinth.test>`);
  expect(mail?.subject).toBe("Reset your Acme <Widgets> password");
  expect(mail?.text).toContain(LINK);
  expect(mail?.text).toContain("30 minutes");
  expect(mail?.html).toContain("Acme &lt;Widgets&gt;");
  expect(mail?.html).toContain(LINK);
  expect(mail?.headers.get("auto-submitted")).toBe("auto-generated");
  expect(await messageRow(id)).toMatchObject({ status: "sent", attempts: 1, provider: "smtp" });
});

test("a message enqueued in a transaction that rolls back does not exist", async () => {
  const tenant = await createTenant(h.db);
  let id = "";
  await expect(
    withTransaction(h.deps, systemCtx("test", tenant.id), async (_tx, ctx) => {
      ({ id } = await enqueueEmail(h.deps, ctx, {
        tenantId: tenant.id,
        to: "gone@example.com",
        template: "email-verification",
        data: { name: "Gone", link: LINK, expiresInMinutes: 60 },
      }));
      throw new Error("the change failed");
    }),
  ).rejects.toThrow("the change failed");
  expect(id).not.toBe("");
  expect(await messageRow(id)).toBeUndefined();
  const jobs = await execute(h.db, sql`select 1 from background_jobs where dedup_key = ${`email:${id}`}`);
  expect(jobs).toHaveLength(0);
});

test("a deployment's template overrides the built-in one for its locale; another locale falls back", async () => {
  const tenant = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  const before = smtp.received.length;
  const fr = await enqueueEmail(h.deps, ctx, {
    tenantId: tenant.id,
    to: "fr@example.com",
    template: "password-reset",
    locale: "fr-CA",
    data: { name: "Zoé", link: LINK, expiresInMinutes: 30 },
  });
  const de = await enqueueEmail(h.deps, ctx, {
    tenantId: tenant.id,
    to: "de@example.com",
    template: "password-reset",
    locale: "de",
    data: { name: "Jürgen", link: LINK, expiresInMinutes: 30 },
  });
  await sendEmailMessage(h.deps, { messageId: fr.id });
  await sendEmailMessage(h.deps, { messageId: de.id });
  const got = (await smtp.waitFor(before + 2)).slice(before);
  const byTo = Object.fromEntries(got.map((r) => [r.envelope.to[0], r.mail]));
  expect(byTo["fr@example.com"]?.subject).toBe(`Réinitialiser — ${tenant.name}`);
  expect(byTo["fr@example.com"]?.text).toBe(`Bonjour Zoé : ${LINK}\n`);
  // the override has no HTML: Plinth's English HTML stands in for it
  expect(byTo["fr@example.com"]?.html).toContain("Choose a new password");
  expect(byTo["de@example.com"]?.subject).toBe(`Ihr Passwort für ${tenant.name} zurücksetzen`);
});

test("a tenant's own notification provider sends its messages from its own address; others use the platform's", async () => {
  const tenant = await createTenant(h.db);
  const other = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  await putTenantSecret(h.deps, ctx, { name: "smtp-password", value: tenantSmtp.password });
  await putTenantProvider(h.deps, ctx, {
    type: "notification",
    provider: "smtp",
    status: "Active",
    settings: {
      host: "localhost",
      port: tenantSmtp.port,
      security: "starttls",
      username: tenantSmtp.user,
      from: "Acme <support@acme.test>",
    },
    secretRefs: { password: "smtp-password" },
  });
  const before = smtp.received.length;
  const own = await enqueueEmail(h.deps, ctx, {
    tenantId: tenant.id,
    to: "own@example.com",
    template: "email-verification",
    data: { name: "Own", link: LINK, expiresInMinutes: 60 },
  });
  const platform = await enqueueEmail(h.deps, systemCtx("test", other.id), {
    tenantId: other.id,
    to: "platform@example.com",
    template: "email-verification",
    data: { name: "Other", link: LINK, expiresInMinutes: 60 },
  });
  expect(await sendEmailMessage(h.deps, { messageId: own.id })).toBe("sent");
  expect(await sendEmailMessage(h.deps, { messageId: platform.id })).toBe("sent");
  const [mine] = await tenantSmtp.waitFor(1);
  expect(mine?.mail.from?.text).toBe('"Acme" <support@acme.test>');
  expect(mine?.envelope.to).toEqual(["own@example.com"]);
  const platformGot = (await smtp.waitFor(before + 1)).slice(before);
  expect(platformGot.map((r) => r.envelope.to[0])).toEqual(["platform@example.com"]);
  expect(tenantSmtp.received).toHaveLength(1);
});

test("a refused send is recorded and retried by the job; the last attempt marks it failed", async () => {
  const tenant = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  await putTenantProvider(h.deps, ctx, {
    type: "notification",
    provider: "smtp",
    status: "Active",
    // nothing listens on port 1
    settings: { host: "127.0.0.1", port: 1, security: "none" },
    secretRefs: {},
  });
  const { id } = await enqueueEmail(h.deps, ctx, {
    tenantId: tenant.id,
    to: "nobody@example.com",
    template: "email-verification",
    data: { name: "N", link: LINK, expiresInMinutes: 60 },
  });
  const signal = new AbortController().signal;
  await expect(
    sendEmailMessage(h.deps, { messageId: id }, { signal, attempt: 1, maxAttempts: 2 }),
  ).rejects.toThrow("SMTP send failed");
  expect(await messageRow(id)).toMatchObject({ status: "pending", attempts: 1 });
  await expect(
    sendEmailMessage(h.deps, { messageId: id }, { signal, attempt: 2, maxAttempts: 2 }),
  ).rejects.toThrow("SMTP send failed");
  expect(await messageRow(id)).toMatchObject({ status: "failed", attempts: 2 });
  expect(await sendEmailMessage(h.deps, { messageId: id })).toBe("skipped");
});

test("a tenant whose provider is `development` gets its messages logged, the link's token redacted", async () => {
  const tenant = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  await putTenantProvider(h.deps, ctx, {
    type: "notification",
    provider: "development",
    status: "Active",
    settings: {},
    secretRefs: {},
  });
  const { id } = await enqueueEmail(h.deps, ctx, {
    tenantId: tenant.id,
    to: "dev@example.com",
    template: "password-reset",
    data: { name: "Dev", link: LINK, expiresInMinutes: 30 },
  });
  expect(await sendEmailMessage(h.deps, { messageId: id })).toBe("sent");
  const line = h.logs.find((l) => l.includes(id) && l.includes("development provider"));
  expect(line).toContain("token=[REDACTED]");
  expect(line).not.toContain("secret-token-value-123");
});

test("a sign-in message's code is redacted in the development log line like the link's token", async () => {
  const tenant = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  await putTenantProvider(h.deps, ctx, {
    type: "notification",
    provider: "development",
    status: "Active",
    settings: {},
    secretRefs: {},
  });
  const { id } = await enqueueEmail(h.deps, ctx, {
    tenantId: tenant.id,
    to: "dev@example.com",
    template: "sign-in-link",
    data: { name: "Dev", code: "480913", link: LINK, expiresInMinutes: 10 },
  });
  expect(await sendEmailMessage(h.deps, { messageId: id })).toBe("sent");
  const line = h.logs.find((l) => l.includes(id) && l.includes("development provider"));
  expect(line).toContain("token=[REDACTED]");
  expect(line).toContain("is [REDACTED]");
  expect(line).not.toContain("480913");
});

test("no log line holds the link or its token", async () => {
  const all = h.logs.join("\n");
  expect(all).not.toContain("secret-token-value-123");
  expect(all).toContain("e-mail sent");
});
