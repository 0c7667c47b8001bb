import { lookup as dnsLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import tls from "node:tls";

/**
 * Where a webhook may be sent (SSRF protection): every address a destination resolves to must be
 * public, and the address checked is the one connected to (the lookup handed to the HTTP client
 * answers with the addresses it validated, so a DNS answer that changes between check and connect
 * cannot slip through). Redirects are never followed.
 */

/** One resolved address. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses (injectable: tests make names resolve where they need). */
export type HostResolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: HostResolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/** Why an address is not public: the rule named in a 400 and in an attempt's error. */
export type AddressRule =
  | "loopback"
  | "private"
  | "link_local"
  | "cgnat"
  | "multicast"
  | "unique_local"
  | "unspecified"
  | "reserved"
  | "metadata";

type V4Range = [number, number, AddressRule];

const v4 = (text: string): number => {
  const parts = text.split(".").map(Number);
  return (((parts[0] ?? 0) << 24) | ((parts[1] ?? 0) << 16) | ((parts[2] ?? 0) << 8) | (parts[3] ?? 0)) >>> 0;
};
const cidr4 = (base: string, bits: number, rule: AddressRule): V4Range => [v4(base), bits, rule];

// order matters: the metadata address before link-local, so the answer names it
const V4_RANGES: V4Range[] = [
  cidr4("169.254.169.254", 32, "metadata"),
  cidr4("0.0.0.0", 8, "unspecified"),
  cidr4("10.0.0.0", 8, "private"),
  cidr4("100.64.0.0", 10, "cgnat"),
  cidr4("127.0.0.0", 8, "loopback"),
  cidr4("169.254.0.0", 16, "link_local"),
  cidr4("172.16.0.0", 12, "private"),
  cidr4("192.0.0.0", 24, "reserved"),
  cidr4("192.0.2.0", 24, "reserved"),
  cidr4("192.88.99.0", 24, "reserved"), // the deprecated 6to4 relay anycast
  cidr4("192.168.0.0", 16, "private"),
  cidr4("198.18.0.0", 15, "reserved"),
  cidr4("198.51.100.0", 24, "reserved"),
  cidr4("203.0.113.0", 24, "reserved"),
  cidr4("224.0.0.0", 4, "multicast"),
  cidr4("240.0.0.0", 4, "reserved"),
];

function classifyV4(address: string): AddressRule | null {
  const n = v4(address);
  for (const [base, bits, rule] of V4_RANGES) {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    if ((n & mask) >>> 0 === (base & mask) >>> 0) return rule;
  }
  return null;
}

/** The 16 bytes of an IPv6 address (with an embedded dotted IPv4 tail, zone id dropped). */
function v6Bytes(address: string): number[] | null {
  let text = address.split("%")[0] ?? "";
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const n = v4(dotted[1]);
    tail.push((n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255);
    text = `${text.slice(0, -dotted[1].length)}0:0`;
  }
  const [head = "", rest] = text.split("::");
  const groups = (part: string) => (part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16)));
  const front = groups(head);
  const back = rest === undefined ? [] : groups(rest);
  const fill = rest === undefined ? 0 : 8 - front.length - back.length;
  const all = [...front, ...new Array(Math.max(0, fill)).fill(0), ...back];
  if (all.length !== 8 || all.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return null;
  const bytes = all.flatMap((g) => [(g >> 8) & 255, g & 255]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

function classifyV6(address: string): AddressRule | null {
  const b = v6Bytes(address);
  if (!b) return "reserved";
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const embedded = () => b.slice(12, 16).join(".");
  if (zero(0, 15) && b[15] === 1) return "loopback";
  if (zero(0, 16)) return "unspecified";
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), SIIT IPv4-translated
  // (::ffff:0:a.b.c.d, RFC 2765) and NAT64 (64:ff9b::a.b.c.d, RFC 6052) carry an IPv4 address
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return classifyV4(embedded());
  if (zero(0, 12)) return classifyV4(embedded());
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && zero(10, 12))
    return classifyV4(embedded()) ?? "reserved";
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12))
    return classifyV4(embedded());
  // the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is not globally reachable: refused whole,
  // naming the embedded address's rule where the /96 form carries one
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && b[4] === 0x00 && b[5] === 0x01)
    return (zero(6, 12) ? classifyV4(embedded()) : null) ?? "reserved";
  // 6to4 (2002:a.b.c.d::/16) embeds an IPv4 address in bytes 2-5
  if (b[0] === 0x20 && b[1] === 0x02) return classifyV4(b.slice(2, 6).join("."));
  // fd00:ec2::254: the AWS instance metadata service over IPv6
  if (
    b[0] === 0xfd &&
    b[1] === 0x00 &&
    b[2] === 0x0e &&
    b[3] === 0xc2 &&
    zero(4, 14) &&
    b[14] === 0x02 &&
    b[15] === 0x54
  )
    return "metadata";
  if (((b[0] ?? 0) & 0xfe) === 0xfc) return "unique_local";
  if (b[0] === 0xfe && ((b[1] ?? 0) & 0xc0) === 0x80) return "link_local";
  if (b[0] === 0xfe && ((b[1] ?? 0) & 0xc0) === 0xc0) return "unique_local"; // site-local (deprecated)
  if (b[0] === 0xff) return "multicast";
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0x0d && b[3] === 0xb8) return "reserved"; // documentation
  // 2001::/23, IETF protocol assignments (Teredo, benchmarking, ORCHID, AMT, AS112 …): none a webhook
  if (b[0] === 0x20 && b[1] === 0x01 && ((b[2] ?? 0) & 0xfe) === 0x00) return "reserved";
  if (b[0] === 0x01 && zero(1, 6) && (zero(6, 8) || (b[6] === 0 && b[7] === 1))) return "reserved"; // 100::/64 discard-only, 100:0:0:1::/64 dummy
  if (b[0] === 0x3f && b[1] === 0xff && ((b[2] ?? 0) & 0xf0) === 0x00) return "reserved"; // 3fff::/20 documentation
  if (b[0] === 0x5f && b[1] === 0x00) return "reserved"; // 5f00::/16 SRv6 segment identifiers
  return null;
}

/** The rule an address breaks, or null when it is public. Not an address at all: `reserved`. */
export function addressRule(address: string): AddressRule | null {
  const family = isIP(address.split("%")[0] ?? "");
  if (family === 4) return classifyV4(address);
  if (family === 6) return classifyV6(address);
  return "reserved";
}

/** A destination refused by a rule; `detail` names the rule and never a secret. */
export class DestinationRefused extends Error {
  override name = "DestinationRefused";
  constructor(
    readonly rule: AddressRule | "scheme" | "https_required" | "credentials" | "unresolvable",
    detail: string,
  ) {
    super(detail);
  }
}

export interface DestinationPolicy {
  /** Production: only `https`. */
  httpsOnly: boolean;
  /** `Webhooks:AllowPrivateDestinations`. */
  allowPrivate: boolean;
  resolve: HostResolver;
  /** `Webhooks:TrustedCaFile`: CA certificates trusted beside the system roots. */
  trustedCa?: string[];
}

/** Checks the URL's form (scheme, no credentials); the addresses are checked by `checkAddresses`. */
export function checkUrlForm(url: URL, policy: Pick<DestinationPolicy, "httpsOnly">): void {
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new DestinationRefused("scheme", "only http and https destinations are allowed");
  if (policy.httpsOnly && url.protocol !== "https:")
    throw new DestinationRefused("https_required", "the destination must use https in Production");
  if (url.username || url.password)
    throw new DestinationRefused("credentials", "the URL must not carry a user name or password");
}

const hostOf = (url: URL) => url.hostname.replace(/^\[|\]$/g, "");

/** Resolves `hostname` (an IP literal resolves to itself) and refuses it unless every address is public. */
export async function checkAddresses(
  hostname: string,
  policy: Pick<DestinationPolicy, "allowPrivate" | "resolve">,
): Promise<ResolvedAddress[]> {
  const literal = isIP(hostname);
  let addresses: ResolvedAddress[];
  if (literal) addresses = [{ address: hostname, family: literal === 6 ? 6 : 4 }];
  else {
    try {
      addresses = await policy.resolve(hostname);
    } catch {
      throw new DestinationRefused("unresolvable", `the host name "${hostname}" does not resolve`);
    }
    if (addresses.length === 0)
      throw new DestinationRefused("unresolvable", `the host name "${hostname}" does not resolve`);
  }
  if (!policy.allowPrivate)
    for (const { address } of addresses) {
      const rule = addressRule(address);
      if (rule)
        throw new DestinationRefused(
          rule,
          `the destination resolves to ${address}, a ${rule.replace("_", "-")} address (refused unless Webhooks:AllowPrivateDestinations)`,
        );
    }
  return addresses;
}

/** The whole check of a destination at registration: the form, then every address it resolves to. */
export async function checkDestination(rawUrl: string, policy: DestinationPolicy): Promise<URL> {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new DestinationRefused("scheme", "not an absolute URL");
  }
  checkUrlForm(url, policy);
  await checkAddresses(hostOf(url), policy);
  return url;
}

/**
 * The `lookup` to hand node's HTTP client: it answers only with addresses `checkAddresses` passed, so
 * the address connected to is the address checked (a DNS answer changing between check and connect
 * cannot slip through). A refused address fails the request with `DestinationRefused`.
 */
export function pinnedLookup(policy: Pick<DestinationPolicy, "allowPrivate" | "resolve">) {
  const lookup = (
    hostname: string,
    options: { all?: boolean } | number | undefined,
    callback: (error: Error | null, address: string | ResolvedAddress[], family?: number) => void,
  ) => {
    checkAddresses(hostname, policy).then(
      (addresses) => {
        const all = typeof options === "object" && options?.all;
        if (all) callback(null, addresses);
        else {
          const first = addresses[0] as ResolvedAddress;
          callback(null, first.address, first.family);
        }
      },
      (error) => callback(error as Error, []),
    );
  };
  // node's LookupFunction type does not describe the `all` form; this one answers both
  return lookup as unknown as http.RequestOptions["lookup"];
}

export type AttemptErrorClass = "http_status" | "timeout" | "destination_refused" | "dns" | "tls" | "network";

export interface AttemptResult {
  statusCode: number | null;
  errorClass: AttemptErrorClass | null;
  /** A short reason safe to store (a rule, an error code); never the body or a secret. */
  reason: string | null;
  durationMs: number;
}

export interface SendInput {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** At most this many bytes of the answer are read; the rest is dropped. */
  maxResponseBytes: number;
  policy: DestinationPolicy;
  signal?: AbortSignal;
}

const TLS_CODES = /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|HOSTNAME|ERR_TLS/;

/**
 * POSTs one signed delivery: the host is resolved once, every address checked, and the connection
 * made only to the checked addresses (with the name as Host and SNI). 2xx is success; anything
 * else, a timeout of `timeoutMs` for the whole exchange, or a refused destination is a failed
 * attempt. Never throws.
 */
export async function sendDelivery(input: SendInput): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let url: URL;
  try {
    url = new URL(input.url);
    checkUrlForm(url, input.policy);
  } catch (error) {
    const reason = error instanceof DestinationRefused ? error.rule : "scheme";
    return { statusCode: null, errorClass: "destination_refused", reason, durationMs: elapsed() };
  }
  const host = hostOf(url);
  if (isIP(host) && !input.policy.allowPrivate) {
    const rule = addressRule(host);
    if (rule)
      return { statusCode: null, errorClass: "destination_refused", reason: rule, durationMs: elapsed() };
  }
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (result: Omit<AttemptResult, "durationMs">) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      input.signal?.removeEventListener("abort", onAbort);
      request.destroy();
      resolve({ ...result, durationMs: elapsed() });
    };
    const client = url.protocol === "https:" ? https : http;
    const request = client.request(
      url,
      {
        method: "POST",
        headers: {
          ...input.headers,
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(input.body)),
          "user-agent": "Plinth-Webhooks/1",
        },
        lookup: pinnedLookup(input.policy),
        ...(input.policy.trustedCa ? { ca: [...tls.rootCertificates, ...input.policy.trustedCa] } : {}),
      },
      (response) => {
        const status = response.statusCode ?? 0;
        let read = 0;
        response.on("data", (chunk: Buffer) => {
          read += chunk.length;
          if (read >= input.maxResponseBytes) done();
        });
        const done = () =>
          finish(
            status >= 200 && status < 300
              ? { statusCode: status, errorClass: null, reason: null }
              : { statusCode: status, errorClass: "http_status", reason: `HTTP ${status}` },
          );
        response.on("end", done);
        response.on("error", done);
      },
    );
    const timer = setTimeout(
      () =>
        finish({ statusCode: null, errorClass: "timeout", reason: `no answer within ${input.timeoutMs} ms` }),
      input.timeoutMs,
    );
    const onAbort = () => finish({ statusCode: null, errorClass: "network", reason: "aborted" });
    input.signal?.addEventListener("abort", onAbort, { once: true });
    request.on("error", (error: Error & { code?: string }) => {
      if (error instanceof DestinationRefused)
        return finish({ statusCode: null, errorClass: "destination_refused", reason: error.rule });
      const code = error.code ?? error.name;
      if (code === "ENOTFOUND" || code === "EAI_AGAIN")
        return finish({ statusCode: null, errorClass: "dns", reason: code });
      if (TLS_CODES.test(code)) return finish({ statusCode: null, errorClass: "tls", reason: code });
      finish({ statusCode: null, errorClass: "network", reason: code });
    });
    request.end(input.body);
  });
}
