import { afterAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/config/config-error.ts";
import { systemCtx } from "../../src/context.ts";
import { createWebhookEndpoint } from "../../src/webhooks/create-webhook-endpoint.ts";
import { deliverAttempt } from "../../src/webhooks/deliver.ts";
import { sendDelivery, systemResolver } from "../../src/webhooks/destinations.ts";
import { testWebhookEndpoint } from "../../src/webhooks/test-webhook-endpoint.ts";
import { updateWebhookEndpoint } from "../../src/webhooks/update-webhook-endpoint.ts";
import { testConfig, useTestApp } from "../helpers/app.ts";
import { createTenant, newMasterKey } from "../helpers/identity.ts";
import { ROOT } from "../helpers/process.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";

// Webhooks:TrustedCaFile: the example receiver over https with a self-signed certificate made now.
const dir = mkdtempSync(join(tmpdir(), "plinth-receiver-ca-"));
function selfSigned(name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}-key.pem`);
  const made = spawnSync("openssl", [
    ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"],
    ...["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert],
  ]);
  if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
  return { cert, key };
}
const receiverCert = selfSigned("receiver");
const otherCert = selfSigned("other");
const secrets = {
  "Security:TenantSecrets:KeyId": "wh-ca",
  "Security:TenantSecrets:MasterKey": newMasterKey(),
};

const h = useTestApp({
  settings: {
    ...secrets,
    "Webhooks:AllowPrivateDestinations": "true",
    "Webhooks:TrustedCaFile": receiverCert.cert,
  },
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The documented example receiver, as a process: https with the given certificate, a free port. */
async function startReceiver(secret: string): Promise<{ child: Child; url: string }> {
  const child = spawnBun([join(ROOT, "examples/webhook-receiver/receiver.ts")], {
    RECEIVER_PORT: "0",
    RECEIVER_CERT_FILE: receiverCert.cert,
    RECEIVER_KEY_FILE: receiverCert.key,
    PLINTH_WEBHOOK_SECRET: secret,
  });
  const line = await child.waitForLine((l) => l.startsWith("listening on "));
  return { child, url: line.slice("listening on ".length).trim() };
}

const send = (url: string, trustedCa?: string[]) =>
  sendDelivery({
    url,
    headers: {},
    body: "{}",
    timeoutMs: 5_000,
    maxResponseBytes: 1024,
    policy: { httpsOnly: false, allowPrivate: true, resolve: systemResolver, trustedCa },
  });

test("a delivery to the self-signed example receiver succeeds with Webhooks:TrustedCaFile, and only then", async () => {
  const tenant = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  // the endpoint is made first: the receiver verifies with the endpoint's secret
  const created = await createWebhookEndpoint(h.deps, ctx, {
    url: "https://localhost:1/plinth",
    events: ["*"],
  });
  const receiver = await startReceiver(created.secret);
  // its own port, not the API's
  expect(receiver.url).toMatch(/^https:\/\/localhost:\d+\/$/);
  expect(receiver.url).not.toContain(":8080/");
  await updateWebhookEndpoint(h.deps, ctx, { id: created.endpoint.id, url: `${receiver.url}plinth` });

  const { deliveryId } = await testWebhookEndpoint(h.deps, ctx, { id: created.endpoint.id });
  expect(await deliverAttempt(h.deps, { deliveryId, attempt: 1 })).toBe("succeeded");
  const printed = await receiver.child.waitForLine((l) => l.startsWith("webhook.test "));
  expect(printed).toContain("webhook.test");

  // the same receiver without the setting, or with another certificate trusted: a tls failure
  const [none, other, trusted] = await Promise.all([
    send(`${receiver.url}plinth`),
    send(`${receiver.url}plinth`, [readFileSync(otherCert.cert, "utf8")]),
    send(`${receiver.url}plinth`, h.deps.config.webhookTrustedCa),
  ]);
  expect(none.errorClass).toBe("tls");
  expect(other.errorClass).toBe("tls");
  // reached and verified by TLS; the receiver refuses the unsigned body (400), which is not tls
  expect(trusted).toMatchObject({ errorClass: "http_status", statusCode: 400 });
});

test("the trusted file must hold a certificate: unreadable or empty stops the start, naming the key", () => {
  const empty = join(dir, "empty.pem");
  writeFileSync(empty, "not a certificate\n");
  const broken = join(dir, "broken.pem");
  writeFileSync(broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  for (const [path, problem] of [
    [join(dir, "absent.pem"), /cannot be read \(ENOENT\)/],
    [empty, /holds no PEM certificate/],
    [broken, /not a valid X\.509 certificate/],
  ] as const) {
    let error: unknown;
    try {
      testConfig({ settings: { "Webhooks:TrustedCaFile": path } });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(1);
    expect(problems[0]?.key).toBe("Webhooks:TrustedCaFile");
    expect(problems[0]?.problem).toMatch(problem);
  }
  const loaded = testConfig({ settings: { "Webhooks:TrustedCaFile": receiverCert.cert } });
  expect(loaded.webhookTrustedCa).toHaveLength(1);
});
