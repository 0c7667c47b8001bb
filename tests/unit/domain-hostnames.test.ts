import { describe, expect, test } from "bun:test";
import { parseTxtData } from "../../src/custom-domains/dns.ts";
import { validateHostname } from "../../src/custom-domains/hostnames.ts";
import { AppError } from "../../src/errors.ts";

const policy = {
  platformHost: "API.Plinth.example:443",
  allowedHosts: ["admin.plinth.example", "localhost"],
};

describe("validateHostname", () => {
  const accepted: [string, string][] = [
    ["app.customer.com", "app.customer.com"],
    ["App.Customer.COM", "app.customer.com"],
    ["app.customer.com.", "app.customer.com"],
    ["  app.customer.com  ", "app.customer.com"],
    ["bücher.example", "xn--bcher-kva.example"],
    ["ÉCOLE.example.fr", "xn--cole-9oa.example.fr"],
    ["xn--bcher-kva.example", "xn--bcher-kva.example"],
    ["a-b.c-d.example", "a-b.c-d.example"],
    ["plinth.example", "plinth.example"], // the platform's parent is not the platform
    ["notapi.plinth.example", "notapi.plinth.example"],
  ];
  for (const [input, stored] of accepted)
    test(`accepts ${JSON.stringify(input)} as ${stored}`, () =>
      expect(validateHostname(input, policy)).toBe(stored));

  const refused: [string, RegExp][] = [
    ["", /required/],
    ["app.customer.com:443", /no port/],
    ["[::1]", /no port/],
    ["*.customer.com", /wildcard/],
    ["https://app.customer.com", /no scheme/],
    ["app.customer.com/path", /no scheme/],
    ["user@app.customer.com", /no scheme/],
    ["app..customer.com", /not a valid/],
    ["app.customer.com..", /not a valid/],
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
