import { describe, expect, test } from "bun:test";
import { parseTxtData } from "../../src/custom-domains/dns.ts";
import { parseHostHeader, validateHostname } from "../../src/custom-domains/hostname-policy.ts";
import { AppError } from "../../src/errors.ts";

const policy = {
  platformHost: "API.Plinth.example:443",
  allowedHosts: ["admin.plinth.example", "localhost"],
  deniedSuffixes: ["denied.example.net", ".corp.example"],
};

describe("validateHostname", () => {
  const accepted: [string, string][] = [
    ["app.customer.com", "app.customer.com"],
    ["xn--bcher-kva.example", "xn--bcher-kva.example"],
    ["xn--cole-9oa.example.fr", "xn--cole-9oa.example.fr"],
    // a whole-Cyrillic label (пример) in its IDNA form; and a Japanese name mixing Han and Kana
    ["xn--e1afmkfd.example", "xn--e1afmkfd.example"],
    ["xn--eckwd4c7c.xn--zckzah", "xn--eckwd4c7c.xn--zckzah"],
    ["app.tenant-b.test", "app.tenant-b.test"],
    ["deadbeef.example.com", "deadbeef.example.com"], // 222.173.190.239 is public
    ["8-8-8-8.sslip.io", "8-8-8-8.sslip.io"],
    ["a-b.c-d.example", "a-b.c-d.example"],
    ["plinth.example", "plinth.example"], // the platform's parent is not the platform
    // ASCII case and one trailing dot (the fully qualified form) fold to the canonical name
    ["App.Customer.COM", "app.customer.com"],
    ["app.customer.com.", "app.customer.com"],
    ["Shop.Example.com.", "shop.example.com"],
    ["notapi.plinth.example", "notapi.plinth.example"],
  ];
  for (const [input, stored] of accepted)
    test(`accepts ${JSON.stringify(input)} as ${stored}`, () =>
      expect(validateHostname(input, policy)).toBe(stored));

  const refused: [string, RegExp][] = [
    ["", /required/],
    ["app.customer.com:443", /no port/],
    ["[::1]", /no port/],
    ["user:pw@app.customer.com", /no scheme/],
    ["*.customer.com", /wildcard/],
    ["https://app.customer.com", /no scheme/],
    ["app.customer.com/path", /no scheme/],
    ["user@app.customer.com", /no scheme/],
    ["app..customer.com", /not a valid/],
    ["app.customer.com..", /trailing dot/],
    // non-ASCII is never folded into a name
    ["  app.customer.com  ", /ASCII only/],
    ["bücher.example", /ASCII only/],
    ["ａｐｐ.customer.com", /ASCII only/], // full-width letters
    ["app\u3002customer.com", /ASCII only/], // ideographic full stop
    ["app.customer.com?x", /no scheme/],
    ["app.customer.com#x", /no scheme/],
    ["xn--zz.example", /not a valid IDNA/],
    // an IDN homograph: "аpple" with a Cyrillic а mixes Cyrillic and Latin
    ["xn--pple-43d.com", /mixes scripts/],
    ["ab--c.example", /reserved --/],
    // internal names and wildcard-DNS encodings of loopback and private addresses
    ["metadata.google.internal", /internal or reserved/],
    ["kubernetes.default.svc.cluster.local", /internal or reserved/],
    ["kubernetes.default.svc", /internal or reserved/],
    ["localhost.localdomain", /internal or reserved/],
    ["app.localhost", /internal or reserved/],
    ["printer.local", /internal or reserved/],
    ["1.0.0.127.in-addr.arpa", /internal or reserved/],
    ["x.localtest.me", /internal or reserved/],
    ["127.0.0.1.nip.io", /loopback or private/],
    ["app.10.1.2.3.nip.io", /loopback or private/],
    ["10-0-0-1.sslip.io", /loopback or private/],
    ["app-192-168-1-1.sslip.io", /loopback or private/],
    ["7f000001.nip.io", /loopback or private/],
    ["a9fea9fe.nip.io", /loopback or private/], // 169.254.169.254, the metadata address
    ["--1.sslip.io", /not a valid/],
    ["fe80--1.sslip.io", /loopback or private/],
    ["fd00--1.sslip.io", /loopback or private/],
    ["denied.example.net", /internal or reserved/],
    ["app.corp.example", /internal or reserved/],
    ["-app.customer.com", /not a valid/],
    ["app_1.customer.com", /not a valid/],
    ["customer", /fully qualified/],
    ["10.0.0.1", /IP address/],
    [`${"a".repeat(64)}.example.com`, /not a valid/],
    [`${"abcdefghi.".repeat(26)}com`, /253/],
    ["api.plinth.example", /platform host/],
    ["API.PLINTH.EXAMPLE.", /platform host/],
    ["tenant.api.plinth.example", /platform host/],
    ["admin.plinth.example", /platform host/],
  ];
  for (const [input, reason] of refused)
    test(`refuses ${JSON.stringify(input.slice(0, 40))}`, () => {
      try {
        validateHostname(input, policy);
        throw new Error("accepted");
      } catch (error) {
        expect(error).toBeInstanceOf(AppError);
        const problem = error as AppError;
        expect(problem.code).toBe("validation_failed");
        expect(problem.fields?.[0]?.path).toBe("hostname");
        expect(problem.fields?.[0]?.message).toMatch(reason);
      }
    });
});

describe("parseTxtData (DoH JSON TXT data)", () => {
  const cases: [string, string][] = [
    ['"abc"', "abc"],
    ['"abc" "def"', "abcdef"],
    ['"ab\\"c" "d\\\\e"', 'ab"cd\\e'],
    ['"a\\032b"', "a b"],
    ['"v=spf1 include:_spf.example.com ~all"', "v=spf1 include:_spf.example.com ~all"],
    ["unquoted-value", "unquoted-value"],
    ['""', ""],
  ];
  for (const [data, value] of cases) test(`${data} → ${value}`, () => expect(parseTxtData(data)).toBe(value));
});

describe("parseHostHeader", () => {
  const cases: [string, string | null][] = [
    ["app.customer.com", "app.customer.com"],
    ["App.Customer.com:8443", "app.customer.com"],
    ["localhost:3000", "localhost"],
    ["127.0.0.1", "127.0.0.1"],
    ["[::1]:80", "[::1]"],
    ["", null],
    ["a b", null],
    ["app.customer.com:x", null],
    ["app.customer.com:99999", null],
    ["ａｐｐ.customer.com", null],
    ["app.customer.com/evil", null],
    ["user@app.customer.com", null],
  ];
  for (const [value, host] of cases)
    test(`${JSON.stringify(value)} → ${host}`, () => expect(parseHostHeader(value)).toBe(host));
});
