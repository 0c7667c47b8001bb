import { isIPv4, isIPv6 } from "node:net";
import { domainToASCII, domainToUnicode } from "node:url";

/**
 * THE hostname parser: every place a hostname enters Plinth (domain registration, the TLS
 * permission question, the Host header, the gateway) asks it. It does not normalise: a name is
 * accepted only in its one canonical form — lower-case ASCII letters, digits, hyphens and dots,
 * IDNs in their IDNA (`xn--`) form, no trailing dot, no port, path, query, fragment or userinfo,
 * so full-width letters, ideographic dots or a `:443` are refused rather than folded into a real
 * name. Also refused: single labels, IP literals, internal names (built-in and
 * `TenantDomains:DeniedSuffixes`), wildcard-DNS encodings of loopback and private addresses
 * (`127.0.0.1.nip.io`, `10-0-0-1.sslip.io`, `7f000001.nip.io`), and IDN labels that mix scripts
 * (UTS #39 "highly restrictive": one script per label, or Latin with Han/Kana, Han/Bopomofo or
 * Han/Hangul), which is what an IDN homograph (a Cyrillic `а` in a Latin name) needs.
 */

export type HostnameParse = { ok: true; hostname: string } | { ok: false; reason: string };

export interface HostnameRules {
  /** Extra names refused with their subdomains (`TenantDomains:DeniedSuffixes`). */
  deniedSuffixes?: readonly string[];
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Names that only mean something inside a network, or always resolve to loopback. */
export const BUILT_IN_DENIED_SUFFIXES = [
  "localhost",
  "local",
  "internal",
  "localdomain",
  "lan",
  "home.arpa",
  "arpa",
  "svc",
  "cluster.local",
  // public names whose every subdomain resolves to 127.0.0.1
  "localtest.me",
  "lvh.me",
  "vcap.me",
] as const;

/** Scripts a label may combine (UTS #39 highly restrictive); any other mix is refused. */
const SCRIPTS = [
  "Latin",
  "Cyrillic",
  "Greek",
  "Armenian",
  "Georgian",
  "Hebrew",
  "Arabic",
  "Devanagari",
  "Bengali",
  "Thai",
  "Han",
  "Hiragana",
  "Katakana",
  "Hangul",
  "Bopomofo",
] as const;
const SCRIPT_TESTS = SCRIPTS.map((name) => ({ name, re: new RegExp(`^\\p{Script=${name}}$`, "u") }));
const NEUTRAL = /^[\p{Script=Common}\p{Script=Inherited}]$/u;
const ALLOWED_MIXES: readonly (readonly string[])[] = [
  ["Latin", "Han", "Hiragana", "Katakana"],
  ["Latin", "Han", "Bopomofo"],
  ["Latin", "Han", "Hangul"],
];

function scriptsOf(text: string): Set<string> {
  const found = new Set<string>();
  for (const char of text) {
    if (NEUTRAL.test(char)) continue;
    found.add(SCRIPT_TESTS.find((s) => s.re.test(char))?.name ?? `other:${char.codePointAt(0)}`);
  }
  return found;
}

/** Whether one (decoded) label passes UTS #39's highly restrictive level. */
export function singleScript(label: string): boolean {
  const scripts = [...scriptsOf(label)];
  if (scripts.length <= 1) return true;
  return ALLOWED_MIXES.some((mix) => scripts.every((s) => mix.includes(s)));
}

function privateIPv4(address: string): boolean {
  const [a = -1, b = -1] = address.split(".").map(Number);
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    (a === 100 && b >= 64 && b <= 127) ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 198 && (b === 18 || b === 19))
  );
}

function privateIPv6(address: string): boolean {
  const value = address.toLowerCase();
  if (value === "::" || value === "::1") return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(value);
  if (mapped?.[1]) return privateIPv4(mapped[1]);
  return /^f[cd]/.test(value) || /^fe[89ab]/.test(value);
}

/**
 * Whether the name encodes a loopback or private address the way wildcard-DNS services read it:
 * four decimal labels (`127.0.0.1.nip.io`), a dashed address in a label (`10-0-0-1.sslip.io`,
 * `app-192-168-1-1.nip.io`), eight hex digits (`7f000001.nip.io`) or a dashed IPv6 (`--1.sslip.io`).
 */
export function encodesPrivateAddress(labels: readonly string[]): boolean {
  for (let i = 0; i + 4 <= labels.length; i++) {
    const dotted = labels.slice(i, i + 4).join(".");
    if (isIPv4(dotted) && privateIPv4(dotted)) return true;
  }
  for (const label of labels) {
    for (const match of label.matchAll(/(?:^|[^0-9])(\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3})(?=$|[^0-9])/g)) {
      const address = (match[1] ?? "").replaceAll("-", ".");
      if (isIPv4(address) && privateIPv4(address)) return true;
    }
    for (const match of label.matchAll(/(?:^|-)([0-9a-f]{8})(?=$|-)/g)) {
      const hex = match[1] ?? "";
      const address = [0, 2, 4, 6].map((at) => Number.parseInt(hex.slice(at, at + 2), 16)).join(".");
      if (privateIPv4(address)) return true;
    }
    if (label.includes("--") && !label.startsWith("xn--")) {
      const address = label.replaceAll("-", ":");
      if (isIPv6(address) && privateIPv6(address)) return true;
    }
  }
  return false;
}

function denied(hostname: string, suffixes: readonly string[]): boolean {
  return suffixes.some((suffix) => {
    const s = suffix
      .trim()
      .toLowerCase()
      .replace(/^\.+|\.+$/g, "");
    return s.length > 0 && (hostname === s || hostname.endsWith(`.${s}`));
  });
}

/** Parses a bare hostname that must already be in its canonical form (see the module comment). */
export function parseHostname(raw: unknown, rules: HostnameRules = {}): HostnameParse {
  if (typeof raw !== "string" || raw.length === 0) return { ok: false, reason: "a hostname is required" };
  if (raw.length > 253) return { ok: false, reason: "at most 253 characters" };
  if (!/^[\x21-\x7e]+$/.test(raw))
    return { ok: false, reason: "ASCII only: write an IDN in its IDNA (xn--) form, with plain dots" };
  if (/[/?#@\\]/.test(raw))
    return { ok: false, reason: "a bare hostname only: no scheme, path, query or userinfo" };
  if (raw.includes(":") || raw.startsWith("[")) return { ok: false, reason: "no port (and no IP address)" };
  if (raw.includes("*")) return { ok: false, reason: "wildcards are not supported: add each hostname" };
  if (raw !== raw.toLowerCase()) return { ok: false, reason: "lower case only" };
  if (raw.endsWith(".")) return { ok: false, reason: "no trailing dot" };
  const labels = raw.split(".");
  if (!labels.every((l) => LABEL.test(l))) return { ok: false, reason: "not a valid hostname" };
  if (labels.length < 2) return { ok: false, reason: "a fully qualified name (e.g. app.example.com)" };
  if (/^[0-9]+$/.test(labels.at(-1) ?? "") || /^0x/.test(labels.at(-1) ?? ""))
    return { ok: false, reason: "an IP address is not a hostname" };
  for (const label of labels) {
    if (!label.startsWith("xn--")) {
      if (label.slice(2, 4) === "--")
        return { ok: false, reason: "not a valid hostname (reserved -- at 3–4)" };
      continue;
    }
    const unicode = domainToUnicode(label);
    // a valid A-label decodes, and encodes back to itself
    if (!unicode || unicode === label || domainToASCII(unicode) !== label)
      return { ok: false, reason: `"${label}" is not a valid IDNA label` };
    if (!singleScript(unicode))
      return { ok: false, reason: `"${label}" mixes scripts (a possible look-alike of another name)` };
  }
  if (denied(raw, BUILT_IN_DENIED_SUFFIXES) || denied(raw, rules.deniedSuffixes ?? []))
    return { ok: false, reason: "an internal or reserved name cannot be used" };
  if (encodesPrivateAddress(labels))
    return { ok: false, reason: "a name that encodes a loopback or private address cannot be used" };
  return { ok: true, hostname: raw };
}

/**
 * A Host header value (`name` or `name:port`) as its canonical hostname, or null when it is not
 * one. Hosts are case-insensitive (RFC 9110), so ASCII upper case is lowered first; nothing else
 * is folded. Bracketed IPv6 literals and bare IPv4 addresses come back as themselves (the platform
 * may be reached by address; a tenant domain never is).
 */
export function parseHostHeader(value: string | null | undefined): string | null {
  if (!value) return null;
  const match = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(value);
  if (!match?.[1]) return null;
  if (match[2] !== undefined && Number(match[2]) > 65_535) return null;
  const host = match[1].replace(/[A-Z]+/g, (s) => s.toLowerCase());
  if (host.startsWith("[")) return isIPv6(host.slice(1, -1)) ? host : null;
  if (isIPv4(host)) return host;
  const parsed = parseHostname(host);
  if (parsed.ok) return parsed.hostname;
  // a platform host may be a single label or an internal name (localhost in Development)
  return /^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$/.test(host) && !host.includes("..") ? host : null;
}
