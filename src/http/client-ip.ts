import { isIP } from "node:net";
import type { Context } from "hono";
import type { AppEnv } from "./request-context.ts";

/**
 * The real client IP: the socket peer, or, when the peer is a trusted proxy
 * (`Tenancy:Resolution:TrustedProxies`, IPs or CIDRs), the first address in X-Forwarded-For that
 * is not a trusted proxy, walking the chain from the right. Anything left of that address was
 * written by the client itself and is ignored.
 *
 * The peer comes from the server: under Bun `server.requestIP(req)?.address`, handed to Hono as
 * the `peerAddress` binding (`app.fetch(req, bunPeer(server, req))`, see server.ts); under Deno
 * `info.remoteAddr.hostname`. Without one (tests using `app.request` without env) the client IP
 * is `unknown`, and all such requests share one rate-limit partition.
 */
export const UNKNOWN_CLIENT_IP = "unknown";

interface Range {
  family: 4 | 6;
  base: bigint;
  bits: number;
}

/**
 * Addresses already normalised: every request asks for its peer's (and, behind a proxy, for the
 * forwarded hops), the few regular expressions and `isIP` cost ~3 µs a request, and nearly every
 * request repeats an address seen a moment ago. Started again when full, so it stays bounded.
 */
const normalised = new Map<string, string | null>();
const NORMALISED_MAX = 10_000;

/** Strips brackets, ports and the IPv4-mapped IPv6 form; returns null unless an IP remains. */
export function normaliseIp(value: string | null | undefined): string | null {
  if (!value) return null;
  let ip = normalised.get(value);
  if (ip === undefined) {
    ip = normaliseIpOnce(value);
    if (normalised.size >= NORMALISED_MAX) normalised.clear();
    normalised.set(value, ip);
  }
  return ip;
}

function normaliseIpOnce(value: string): string | null {
  let ip = value.trim();
  if (ip.startsWith("[")) ip = ip.slice(1, ip.indexOf("]") > 0 ? ip.indexOf("]") : undefined);
  else if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(ip)) ip = ip.slice(0, ip.lastIndexOf(":"));
  const zone = ip.indexOf("%");
  if (zone > 0) ip = ip.slice(0, zone);
  const mapped = /^::ffff:(\d{1,3}(\.\d{1,3}){3})$/i.exec(ip);
  if (mapped?.[1]) ip = mapped[1];
  const family = isIP(ip);
  if (family === 0) return null;
  return family === 6 ? ip.toLowerCase() : ip;
}

function toBigInt(ip: string): { family: 4 | 6; value: bigint } {
  if (isIP(ip) === 4) {
    const value = ip.split(".").reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
    return { family: 4, value };
  }
  let text = ip;
  // an embedded IPv4 tail (e.g. ::ffff:1.2.3.4 kept as IPv6, or 64:ff9b::1.2.3.4)
  const tail = /(\d{1,3}(\.\d{1,3}){3})$/.exec(text);
  if (tail?.[1]) {
    const v4 = toBigInt(tail[1]).value;
    text = `${text.slice(0, -tail[1].length)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head ? head.split(":") : [];
  const right = rest ? rest.split(":") : [];
  const groups =
    rest === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  const value = groups.reduce((acc, group) => (acc << 16n) | BigInt(Number.parseInt(group || "0", 16)), 0n);
  return { family: 6, value };
}

function parseRange(entry: string): Range | null {
  const [address = "", bitsText] = entry.trim().split("/");
  const ip = normaliseIp(address);
  if (!ip) return null;
  const { family, value } = toBigInt(ip);
  const width = family === 4 ? 32 : 128;
  // "10.0.0.1/" must not read as /0 (Number("") is 0): that would trust every address
  if (bitsText !== undefined && !/^\d{1,3}$/.test(bitsText)) return null;
  const bits = bitsText === undefined ? width : Number(bitsText);
  if (bits > width) return null;
  const shift = BigInt(width - bits);
  return { family, base: (value >> shift) << shift, bits };
}

export interface TrustedProxies {
  has(ip: string): boolean;
  /** No proxy is trusted: forwarded headers are never read. */
  readonly empty: boolean;
}

/** Matches IPs against a list of IPs and CIDRs (invalid entries are ignored; config checks them). */
export function trustedProxies(entries: readonly string[]): TrustedProxies {
  const ranges = entries.map(parseRange).filter((r): r is Range => r !== null);
  return {
    empty: ranges.length === 0,
    has: (ip) => {
      if (ranges.length === 0) return false;
      const normal = normaliseIp(ip);
      if (!normal) return false;
      const { family, value } = toBigInt(normal);
      return ranges.some((range) => {
        if (range.family !== family) return false;
        const shift = BigInt((family === 4 ? 32 : 128) - range.bits);
        return (value >> shift) << shift === range.base;
      });
    },
  };
}

/** Pure: the client IP from the peer address and the X-Forwarded-For header value(s). */
export function resolveClientIp(
  peer: string | null | undefined,
  forwardedFor: string | null | undefined,
  trusted: TrustedProxies,
): string {
  const peerIp = normaliseIp(peer);
  if (!peerIp) return UNKNOWN_CLIENT_IP;
  if (!forwardedFor || !trusted.has(peerIp)) return peerIp;
  const hops = forwardedFor.split(",").map((hop) => hop.trim());
  let client = peerIp;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normaliseIp(hops[i]);
    // a malformed entry cannot come from a trusted proxy: stop at the last trustworthy address
    if (!hop) return client;
    client = hop;
    if (!trusted.has(hop)) return hop;
  }
  return client;
}

/**
 * The value a trusted proxy wrote into a forwarded header (`X-Forwarded-Host`, `-Proto`): the last
 * entry. A proxy that appends keeps whatever the client sent in front of its own value, so the
 * first entry is the client's word.
 */
export function lastForwarded(value: string | null | undefined): string | undefined {
  if (!value) return undefined;
  const last = value.slice(value.lastIndexOf(",") + 1).trim();
  return last || undefined;
}

/**
 * A forwarded header's value as a trusted proxy wrote it (`lastForwarded`), or undefined when the
 * socket peer is not a trusted proxy or the header is absent. The peer is only asked for when a
 * proxy is trusted and the header is there.
 */
export function forwardedByProxy(
  c: Context<AppEnv>,
  trusted: TrustedProxies,
  header: "x-forwarded-host" | "x-forwarded-proto",
): string | undefined {
  return forwardedFrom(c.req.raw.headers, () => c.env?.peerAddress, trusted, header);
}

/** `forwardedByProxy` outside a Hono context: the request's headers and a way to read its peer. */
export function forwardedFrom(
  headers: Headers,
  peerAddress: () => string | undefined,
  trusted: TrustedProxies,
  header: "x-forwarded-host" | "x-forwarded-proto",
): string | undefined {
  if (trusted.empty) return undefined;
  const value = lastForwarded(headers.get(header));
  if (value === undefined) return undefined;
  const peer = normaliseIp(peerAddress());
  return peer !== null && trusted.has(peer) ? value : undefined;
}

const NO_PROXIES: TrustedProxies = { has: () => false, empty: true };

/**
 * The request's real client IP (see `resolveClientIp`), worked out on first use and remembered
 * for the rest of the request: routes that never need it (the health probes) never ask the server
 * for the socket peer. The trusted proxies are the ones the `edge` middleware put on the context.
 */
export function clientIp(c: Context<AppEnv>): string {
  let ip = c.get("clientIp");
  if (ip === undefined) {
    const trusted = c.get("trustedProxies") ?? NO_PROXIES;
    ip = resolveClientIp(
      c.env?.peerAddress,
      trusted.empty ? undefined : c.req.raw.headers.get("x-forwarded-for"),
      trusted,
    );
    c.set("clientIp", ip);
  }
  return ip;
}

/**
 * The Bun binding for `app.fetch(req, env)`: the socket peer, read from the server only when a
 * middleware or route asks for it (`server.requestIP` costs a system call).
 */
export function bunPeer(
  server: { requestIP(req: Request): { address: string } | null },
  req: Request,
): { readonly peerAddress: string | undefined } {
  return {
    get peerAddress() {
      return server.requestIP(req)?.address;
    },
  };
}
