import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { type ParsedMail, simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";
import { makeTestCertificates, type TestCertificates } from "./certificates.ts";

/** A message the test server accepted: the envelope and the MIME message parsed by mailparser. */
export interface ReceivedMail {
  envelope: { from: string; to: string[] };
  /** The AUTH user name the client signed in with, or null. */
  user: string | null;
  /** Whether the session was upgraded with STARTTLS (or was TLS) when the message came. */
  secure: boolean;
  mail: ParsedMail;
  raw: string;
}

export interface TestSmtpServer {
  port: number;
  user: string;
  password: string;
  certificates: TestCertificates;
  received: ReceivedMail[];
  /** Resolves once `count` messages have arrived (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedMail[]>;
  /**
   * Holds every RCPT TO reply until `release()` (the SMTP dialogue stays open, no message is
   * accepted yet); `held` resolves when a client is waiting on one.
   */
  holdRecipients(): { held: Promise<void>; release: () => void };
  /** `Section:Key` settings of the platform provider pointing at this server. */
  settings(): Record<string, string>;
  close(): Promise<void>;
}

/**
 * A real SMTP server in the test process (`smtp-server`): STARTTLS with a certificate made at test
 * time for `localhost`, AUTH PLAIN/LOGIN required, the plain text session refused before STARTTLS
 * when `requireTls`. Every accepted message is parsed with `mailparser`.
 */
export async function startSmtpServer(
  options: { requireTls?: boolean; certificates?: TestCertificates } = {},
): Promise<TestSmtpServer> {
  const owned = options.certificates === undefined;
  const certificates = options.certificates ?? makeTestCertificates("localhost");
  const user = "plinth-mailer";
  const password = `smtp-${crypto.randomUUID()}`;
  const received: ReceivedMail[] = [];
  const waiters = new Set<() => void>();
  let hold: { gate: Promise<void>; held: () => void } | null = null;
  const server = new SMTPServer({
    key: readFileSync(certificates.keyPath),
    cert: readFileSync(certificates.certPath),
    authMethods: ["PLAIN", "LOGIN"],
    allowInsecureAuth: !options.requireTls,
    hideSTARTTLS: false,
    logger: false,
    disableReverseLookup: true,
    onAuth(auth, _session, callback) {
      if (auth.username === user && auth.password === password) return callback(null, { user });
      return callback(new Error("invalid credentials"));
    },
    onRcptTo(_address, _session, callback) {
      if (!hold) return callback();
      hold.held();
      void hold.gate.then(() => callback());
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", async () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        received.push({
          envelope: {
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
            to: session.envelope.rcptTo.map((r) => r.address),
          },
          user: typeof session.user === "string" ? session.user : null,
          secure: session.secure,
          mail: await simpleParser(raw),
          raw,
        });
        callback();
        for (const waiter of waiters) waiter();
      });
    },
  });
  server.on("error", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    user,
    password,
    certificates,
    received,
    waitFor: (count, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (received.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(received);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${received.length} of ${count} messages within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    holdRecipients: () => {
      let release = () => {};
      let held = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const heldPromise = new Promise<void>((resolve) => {
        held = resolve;
      });
      hold = { gate, held };
      return {
        held: heldPromise,
        release: () => {
          hold = null;
          release();
        },
      };
    },
    settings: () => ({
      "Email:From": "Plinth Test <no-reply@plinth.test>",
      "Email:Smtp:Host": "localhost",
      "Email:Smtp:Port": String(port),
      "Email:Smtp:Security": "starttls",
      "Email:Smtp:Username": user,
      "Email:Smtp:Password": password,
      "Email:Smtp:TrustedCaFile": certificates.certPath,
    }),
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (owned) certificates.cleanup();
    },
  };
}
