import { expect, test } from "bun:test";
import { unstorable } from "../../src/http/middleware/storable-input.ts";

test("unstorable: a NUL or an unpaired surrogate anywhere, nothing else", () => {
  for (const text of ["a\0b", "\0", "x\ud800", "\ud800y", "\udc00", "a\udc00\ud800b", "😀\ud83d"])
    expect(unstorable(text)).toBe(true);
  const token = `eyJ${"abcXYZ_-.".repeat(90)}`;
  for (const text of ["", "plain", "é and ü", "😀", "\ud83d\ude00\ud83d\ude00", token, "\\u0000", "%00"])
    expect(unstorable(text)).toBe(false);
});

// The input guard reads no header (storable-input.ts): no header value can hold unstorable text,
// and this test fails should a runtime ever let one through.
test("a header value can hold neither a NUL nor a surrogate, so the input guard need not read them", async () => {
  for (const value of ["a\0b", "x\ud800", "\ud83d\ude00"]) {
    expect(() => new Headers({ "x-a": value })).toThrow();
    expect(() => new Request("http://h.test/", { headers: [["x-a", value]] })).toThrow();
  }
  // bytes over 0x7f arrive as Latin-1 characters, never as surrogates
  const server = Bun.serve({
    port: 0,
    fetch: (req) =>
      new Response(JSON.stringify([...req.headers].find(([name]) => name === "x-a")?.[1] ?? null)),
  });
  const raw = async (value: Buffer) => {
    const { connect } = await import("node:net");
    return new Promise<string>((resolve) => {
      let answer = "";
      const socket = connect(server.port as number, "127.0.0.1", () =>
        socket.write(
          Buffer.concat([
            Buffer.from("GET / HTTP/1.1\r\nHost: h.test\r\nX-A: "),
            value,
            Buffer.from("\r\nConnection: close\r\n\r\n"),
          ]),
        ),
      );
      socket.on("data", (chunk) => {
        answer += chunk.toString("latin1");
      });
      socket.on("close", () => resolve(answer));
    });
  };
  try {
    expect(await raw(Buffer.from("a\0b", "latin1"))).toStartWith("HTTP/1.1 400");
    const latin1 = await raw(Buffer.from([0xed, 0xa0, 0x80, 0xff]));
    expect(latin1).toStartWith("HTTP/1.1 200");
    const body = JSON.parse(
      Buffer.from(latin1.split("\r\n\r\n")[1] ?? "", "latin1").toString("utf8"),
    ) as string;
    expect(body).toBe("\u00ed\u00a0\u0080\u00ff");
    expect(unstorable(body)).toBe(false);
  } finally {
    await server.stop(true);
  }
});
