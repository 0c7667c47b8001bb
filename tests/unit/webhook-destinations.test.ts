import { describe, expect, test } from "bun:test";
import { addressRule, checkDestination, DestinationRefused } from "../../src/webhooks/destinations.ts";

describe("addressRule", () => {
  const cases: [string, string | null][] = [
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["172.32.0.1", null],
    ["192.168.1.1", "private"],
    ["169.254.10.10", "link_local"],
    ["169.254.169.254", "metadata"],
    ["100.64.0.1", "cgnat"],
    ["100.127.255.254", "cgnat"],
    ["100.128.0.1", null],
    ["224.0.0.251", "multicast"],
    ["239.1.1.1", "multicast"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["255.255.255.255", "reserved"],
    ["93.184.216.34", null],
    ["8.8.8.8", null],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["fe80::1", "link_local"],
    ["febf::1", "link_local"],
    ["fc00::1", "unique_local"],
    ["fd12:3456::1", "unique_local"],
    ["fd00:ec2::254", "metadata"],
    ["ff02::1", "multicast"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "metadata"],
    ["::ffff:8.8.8.8", null],
    ["64:ff9b::7f00:1", "loopback"],
    ["2002:7f00:1::1", "loopback"],
    // issue #29: the local-use NAT64 prefix (RFC 8215) and the SIIT translated form (RFC 2765)
    ["64:ff9b:1::7f00:1", "loopback"],
    ["64:ff9b:1::127.0.0.1", "loopback"],
    ["64:ff9b:1::a9fe:a9fe", "metadata"],
    ["64:ff9b:1::8.8.8.8", "reserved"],
    ["64:ff9b:1:ffff:ff00:7f00:1::", "reserved"],
    ["::ffff:0:127.0.0.1", "loopback"],
    ["::ffff:0:7f00:1", "loopback"],
    ["::ffff:0:169.254.169.254", "metadata"],
    ["::ffff:0:a00:1", "private"],
    ["::ffff:0:8.8.8.8", "reserved"],
    // the rest of the IANA special-purpose registries (docs/webhooks.md)
    ["192.88.99.1", "reserved"],
    ["192.0.0.170", "reserved"],
    ["2001::1", "reserved"],
    ["2001:2::1", "reserved"],
    ["2001:10::1", "reserved"],
    ["2001:20::1", "reserved"],
    ["2001:1ff::1", "reserved"],
    ["2001:200::1", null],
    ["100::1", "reserved"],
    ["100:0:0:1::1", "reserved"],
    ["3fff::1", "reserved"],
    ["3fff:fff::1", "reserved"],
    ["5f00::1", "reserved"],
    ["2001:db8::1", "reserved"],
    ["2606:4700:4700::1111", null],
    ["2a00:1450:4001:80b::200e", null],
    ["not an address", "reserved"],
  ];
  for (const [address, rule] of cases)
    test(`${address} → ${rule ?? "public"}`, () => expect(addressRule(address)).toBe(rule as never));
});

describe("checkDestination", () => {
  const resolve = (table: Record<string, string[]>) => async (host: string) =>
    (table[host] ?? []).map((address) => ({ address, family: (address.includes(":") ? 6 : 4) as 4 | 6 }));
  const policy = (
    table: Record<string, string[]> = {},
    over: Partial<{ httpsOnly: boolean; allowPrivate: boolean }> = {},
  ) => ({
    httpsOnly: true,
    allowPrivate: false,
    resolve: resolve(table),
    ...over,
  });
  const refusal = async (url: string, p: ReturnType<typeof policy>) => {
    try {
      await checkDestination(url, p);
    } catch (error) {
      if (error instanceof DestinationRefused) return error.rule;
      throw error;
    }
    return null;
  };

  test("https only when asked (Production), no credentials, http(s) only", async () => {
    expect(
      await refusal("http://hooks.example.com/x", policy({ "hooks.example.com": ["93.184.216.34"] })),
    ).toBe("https_required");
    expect(await refusal("ftp://hooks.example.com/x", policy())).toBe("scheme");
    expect(
      await refusal("https://u:p@hooks.example.com/x", policy({ "hooks.example.com": ["93.184.216.34"] })),
    ).toBe("credentials");
    expect(
      await refusal("https://hooks.example.com/x", policy({ "hooks.example.com": ["93.184.216.34"] })),
    ).toBeNull();
  });

  test("every address a name resolves to must be public; literals are checked as they are", async () => {
    const table = { "mixed.example.com": ["93.184.216.34", "10.0.0.5"], "inside.example.com": ["127.0.0.1"] };
    expect(await refusal("https://mixed.example.com/", policy(table))).toBe("private");
    expect(await refusal("https://inside.example.com/", policy(table))).toBe("loopback");
    expect(await refusal("https://[::ffff:127.0.0.1]/", policy())).toBe("loopback");
    expect(await refusal("https://169.254.169.254/latest/meta-data", policy())).toBe("metadata");
    expect(await refusal("https://nowhere.example.com/", policy())).toBe("unresolvable");
    // Webhooks:AllowPrivateDestinations relaxes the address rules, not https
    expect(await refusal("https://inside.example.com/", policy(table, { allowPrivate: true }))).toBeNull();
    expect(await refusal("http://inside.example.com/", policy(table, { allowPrivate: true }))).toBe(
      "https_required",
    );
  });
});
