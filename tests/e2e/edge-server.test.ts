import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { stopChildrenAfterAll } from "../helpers/children.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { ROOT } from "../helpers/process.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";

interface Raw {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/** Sends `head` (and then `body`, if any) over a plain TCP socket and reads the answer until close. */
async function raw(port: number, head: string, body?: Uint8Array): Promise<Raw> {
  const chunks: Uint8Array[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no answer")), 10_000);
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(socket) {
          socket.write(head.replaceAll("\n", "\r\n"));
          if (body) socket.write(body);
        },
        data(_socket, data) {
          chunks.push(new Uint8Array(data));
        },
        close() {
          clearTimeout(timer);
          resolve();
        },
        error(_socket, error) {
          clearTimeout(timer);
          reject(error);
        },
      },
    }).catch(reject);
  });
  const text = new TextDecoder().decode(Buffer.concat(chunks));
  const end = text.indexOf("\r\n\r\n");
  const [statusLine = "", ...lines] = text.slice(0, end).split("\r\n");
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(statusLine.split(" ")[1]), headers, body: text.slice(end + 4) };
}

stopChildrenAfterAll();

describe("the edge of a real server (NODE_ENV=development)", () => {
  let t: TestDatabase;
  let server: Child;
  let port = 0;
  beforeAll(async () => {
    t = await createTestDatabase();
    server = spawnBun([join(ROOT, "src/server.ts")], {
      DATABASE_URL: t.url,
      PORT: "0",
      NODE_ENV: "development",
      Server__MaxBodyBytes: "1024",
    });
    const listening = await server.waitForLine((line) => line.includes('"msg":"listening"'), 20_000);
    port = JSON.parse(listening).port as number;
  });
  afterAll(async () => {
    server.proc.kill("SIGKILL");
    await t.drop();
  });

  const expectProblem = (answer: Raw, status: number, code: string) => {
    expect(answer.status).toBe(status);
    expect(answer.headers.get("content-type")).toStartWith("application/problem+json");
    expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
    const problem = JSON.parse(answer.body) as { code: string; requestId: string };
    expect(problem.code).toBe(code);
    expect(answer.headers.get("x-request-id")).toBe(problem.requestId);
    return problem;
  };

  test("a missing, empty or malformed Host is a 400 problem, never Bun's error page", async () => {
    const heads = [
      "GET /api/plans HTTP/1.0\n\n",
      "GET /api/plans HTTP/1.1\nHost: \nConnection: close\n\n",
      "GET /api/plans HTTP/1.1\nHost: a b\nConnection: close\n\n",
      "GET /api/plans HTTP/1.1\nHost: localhost:abc\nConnection: close\n\n",
    ];
    for (const head of heads) {
      const answer = await raw(port, head);
      expect(answer.body).not.toContain("<html");
      const problem = expectProblem(answer, 400, "host_not_allowed");
      const line = await server.waitForLine((l) => l.includes(problem.requestId));
      expect(JSON.parse(line)).toMatchObject({ msg: "request", status: 400 });
    }
  });

  test("every body over the limit is a 413 problem logged as a 413, either encoding, however large", async () => {
    const sizes = [4096, 200_000, 2_000_000];
    for (const size of sizes) {
      const sized = await raw(
        port,
        `POST /api/auth/login HTTP/1.1\nHost: localhost\nContent-Type: application/json\nContent-Length: ${size}\nConnection: close\n\n`,
        new Uint8Array(size).fill(120),
      );
      const chunk = new Uint8Array(size).fill(120);
      const chunked = await raw(
        port,
        "POST /api/auth/login HTTP/1.1\nHost: localhost\nContent-Type: application/json\nTransfer-Encoding: chunked\nConnection: close\n\n",
        Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), chunk, Buffer.from("\r\n0\r\n\r\n")]),
      );
      for (const answer of [sized, chunked]) {
        const problem = expectProblem(answer, 413, "payload_too_large");
        const line = await server.waitForLine((l) => l.includes(problem.requestId));
        expect(JSON.parse(line)).toMatchObject({ msg: "request", status: 413 });
      }
    }
    expect(server.lines.some((line) => line.includes("unhandled error"))).toBe(false);
  });
});
