import { describe, expect, test } from "bun:test";
import { normaliseIp, resolveClientIp, trustedProxies } from "../../src/http/client-ip.ts";

describe("normaliseIp", () => {
  test.each([
    ["1.2.3.4", "1.2.3.4"],
    [" 1.2.3.4 ", "1.2.3.4"],
    ["1.2.3.4:5678", "1.2.3.4"],
    ["::ffff:10.0.0.1", "10.0.0.1"],
    ["[2001:DB8::1]:443", "2001:db8::1"],
    ["fe80::1%eth0", "fe80::1"],
    ["not-an-ip", null],
    ["", null],
    ["999.1.1.1", null],
  ])("%p -> %p", (input, expected) => {
    expect(normaliseIp(input)).toBe(expected);
  });
});

describe("trustedProxies", () => {
  const trusted = trustedProxies(["10.0.0.0/8", "192.168.1.7", "2001:db8::/32", "::1"]);
  test.each([
    ["10.1.2.3", true],
    ["11.0.0.1", false],
    ["192.168.1.7", true],
    ["192.168.1.8", false],
    ["::ffff:10.9.9.9", true],
    ["2001:db8:abcd::5", true],
    ["2001:db9::5", false],
    ["::1", true],
    ["garbage", false],
  ])("%p trusted: %p", (ip, expected) => {
    expect(trusted.has(ip)).toBe(expected);
  });

  test("an empty list trusts nobody; /0 trusts every address of its family", () => {
    expect(trustedProxies([]).has("10.0.0.1")).toBe(false);
    const all4 = trustedProxies(["0.0.0.0/0"]);
    expect(all4.has("8.8.8.8")).toBe(true);
    expect(all4.has("::1")).toBe(false);
  });

  test("a malformed prefix length is ignored, never read as /0", () => {
    for (const entry of ["10.0.0.1/", "10.0.0.1/ ", "10.0.0.1/x", "10.0.0.1/-1", "10.0.0.1/33", "::1/129"]) {
      const trusted = trustedProxies([entry]);
      expect(trusted.has("8.8.8.8")).toBe(false);
      expect(trusted.empty).toBe(true);
    }
  });
});

describe("resolveClientIp", () => {
  const trusted = trustedProxies(["10.0.0.0/8"]);

  test("an untrusted peer is the client, whatever it forwards", () => {
    expect(resolveClientIp("203.0.113.9", "1.1.1.1", trusted)).toBe("203.0.113.9");
  });

  test("a trusted peer's X-Forwarded-For is walked right to left past trusted proxies", () => {
    expect(resolveClientIp("10.0.0.2", "198.51.100.4", trusted)).toBe("198.51.100.4");
    expect(resolveClientIp("10.0.0.2", "198.51.100.4, 10.0.0.9", trusted)).toBe("198.51.100.4");
    // the client prepended a spoofed address: only the hop our proxy wrote counts
    expect(resolveClientIp("10.0.0.2", "6.6.6.6, 198.51.100.4, 10.0.0.9", trusted)).toBe("198.51.100.4");
  });

  test("a trusted peer without X-Forwarded-For is the client", () => {
    expect(resolveClientIp("10.0.0.2", null, trusted)).toBe("10.0.0.2");
  });

  test("all hops trusted: the leftmost is the client; a malformed hop stops the walk", () => {
    expect(resolveClientIp("10.0.0.2", "10.0.0.5, 10.0.0.9", trusted)).toBe("10.0.0.5");
    expect(resolveClientIp("10.0.0.2", "198.51.100.4, garbage, 10.0.0.9", trusted)).toBe("10.0.0.9");
  });

  test("the IPv4-mapped peer form is normalised; no peer is unknown", () => {
    expect(resolveClientIp("::ffff:203.0.113.9", null, trusted)).toBe("203.0.113.9");
    expect(resolveClientIp("::ffff:10.0.0.2", "198.51.100.4", trusted)).toBe("198.51.100.4");
    expect(resolveClientIp(undefined, "1.2.3.4", trusted)).toBe("unknown");
  });
});
