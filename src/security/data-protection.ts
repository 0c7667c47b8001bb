import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, randomUUID } from "node:crypto";
import { and, asc, count, eq, gt, isNull, lte, ne, sql } from "drizzle-orm";
import type { Clock } from "../clock.ts";
import type { AppConfig } from "../config/load.ts";
import type { Db } from "../db/client.ts";
import { dataProtectionKeys } from "../db/schema/data-protection.ts";
import type { Logger } from "../telemetry/logger.ts";
import { type LoadedCertificate, loadCertificate } from "./certificates.ts";
import { unwrapRingKey, wrapRingKey } from "./ring-key-wrapping.ts";

/**
 * Data protection for cookies and other payloads at rest. A key ring of 256-bit keys lives in
 * PostgreSQL, each wrapped with the certificate's RSA public key (RSA-OAEP-SHA256). A payload is
 * AES-256-GCM under a subkey derived (HKDF-SHA256) from a ring key, the application name and the
 * purpose, so a payload protected by another application or for another purpose does not open.
 *
 * Payload: base64url( version 0x01 | key id (16 bytes) | nonce (12) | ciphertext | tag (16) ).
 */

const VERSION = 1;
const KEY_ID_BYTES = 16;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + KEY_ID_BYTES;
const DAY_MS = 86_400_000;
/** How long a process trusts its cached ring before reading PostgreSQL again. */
const RING_REFRESH_MS = 5 * 60_000;
/** Least time between ring reloads caused by payloads under an unknown key id. */
const FORCED_RELOAD_GAP_MS = 1_000;
/** Advisory lock serialising key creation across processes. */
const KEY_CREATION_LOCK = 7_400_201;

export class DataProtectionError extends Error {
  override name = "DataProtectionError";
}

export interface Protector {
  protect(data: string | Uint8Array): Promise<string>;
  /** The protected string; throws DataProtectionError for anything not protected by this app and purpose. */
  unprotect(payload: string): Promise<string>;
  unprotectBytes(payload: string): Promise<Uint8Array>;
}

export interface DataProtectionOptions {
  db: Db;
  applicationName: string;
  /** null only in Development: keys are then stored bare (a warning is logged). */
  certificate: LoadedCertificate | null;
  /** Retired certificates: they still unwrap the keys they wrapped; nothing new is wrapped with them. */
  previousCertificates?: LoadedCertificate[];
  clock: Clock;
  logger: Logger;
  keyLifetimeDays: number;
}

interface RingKey {
  id: string;
  material: Buffer | null;
  activatesAt: Date;
  expiresAt: Date;
  /** Database time of creation: breaks ties between keys activating at the same instant. */
  createdAt: Date;
  /** Wrapped by the current certificate (or bare in an unprotected ring): usable for new payloads. */
  current: boolean;
}

export interface DataProtectionKeyInfo {
  id: string;
  protection: "rsa-oaep-sha256" | "none";
  activatesAt: Date;
  expiresAt: Date;
  usable: boolean;
}

function uuidToBytes(id: string): Buffer {
  return Buffer.from(id.replace(/-/g, ""), "hex");
}

function bytesToUuid(bytes: Uint8Array): string {
  const hex = Buffer.from(bytes).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export class DataProtection {
  readonly applicationName: string;
  readonly protectedAtRest: boolean;
  readonly #options: DataProtectionOptions;
  readonly #thumbprint: string | null;
  readonly #unwrappers: Map<string, LoadedCertificate>;
  #ring = new Map<string, RingKey>();
  #loadedAt = Number.NEGATIVE_INFINITY;
  #subkeys = new Map<string, Buffer>();
  #loading: Promise<void> | null = null;

  constructor(options: DataProtectionOptions) {
    if (!options.applicationName) throw new Error("data protection needs an application name");
    this.#options = options;
    this.applicationName = options.applicationName;
    this.protectedAtRest = options.certificate !== null;
    this.#thumbprint = options.certificate?.certificate.fingerprint256 ?? null;
    this.#unwrappers = new Map();
    if (options.certificate)
      for (const cert of [...(options.previousCertificates ?? []), options.certificate])
        this.#unwrappers.set(cert.certificate.fingerprint256, cert);
  }

  /** A protector for one purpose (e.g. `"cookie", "session"`): payloads of other purposes do not open. */
  forPurpose(...purposes: string[]): Protector {
    if (purposes.length === 0 || purposes.some((p) => !p)) throw new Error("a purpose is required");
    const purpose = purposes.join("\u0000");
    return {
      protect: (data) => this.#protect(purpose, typeof data === "string" ? Buffer.from(data, "utf8") : data),
      unprotect: async (payload) => Buffer.from(await this.#unprotect(purpose, payload)).toString("utf8"),
      unprotectBytes: (payload) => this.#unprotect(purpose, payload),
    };
  }

  /** Creates a key that is used from now on (an early rotation); older keys keep unprotecting. */
  async rotateNow(): Promise<string> {
    const id = await this.#createKey(this.#options.clock.now(), true);
    await this.#reload();
    return id;
  }

  /**
   * Revokes a key (after a compromise): payloads under it no longer open, here at once and in
   * other processes at their next ring refresh. Returns false when there is no such live key.
   */
  async revokeKey(id: string): Promise<boolean> {
    if (!/^[0-9a-f-]{36}$/i.test(id)) return false;
    const revoked = await this.#options.db
      .update(dataProtectionKeys)
      .set({ revokedAt: this.#options.clock.now() })
      .where(and(eq(dataProtectionKeys.id, id), isNull(dataProtectionKeys.revokedAt)))
      .returning({ id: dataProtectionKeys.id });
    await this.#reload();
    return revoked.length > 0;
  }

  /**
   * After a certificate change: wraps every live ring key that a previous certificate wrapped with
   * the current one instead (the key itself is unchanged, so its payloads still open), so that
   * `PreviousCertificates` can be removed. `remaining`: live keys still under another certificate
   * (none this configuration unwraps, or one a process on the old configuration made meanwhile).
   */
  async rewrapKeys(): Promise<{ rewrapped: number; remaining: number }> {
    const { db, certificate } = this.#options;
    const thumbprint = this.#thumbprint;
    if (!certificate || !thumbprint) return { rewrapped: 0, remaining: 0 };
    const elsewhere = and(
      isNull(dataProtectionKeys.revokedAt),
      ne(dataProtectionKeys.certificateThumbprint, thumbprint),
    );
    let rewrapped = 0;
    for (const row of await db.select().from(dataProtectionKeys).where(elsewhere)) {
      const material = this.#unwrap(row);
      if (!material) continue;
      const updated = await db
        .update(dataProtectionKeys)
        .set({ keyMaterial: wrapRingKey(certificate, material), certificateThumbprint: thumbprint })
        .where(and(eq(dataProtectionKeys.id, row.id), eq(dataProtectionKeys.keyMaterial, row.keyMaterial)))
        .returning({ id: dataProtectionKeys.id });
      rewrapped += updated.length;
    }
    const [left] = await db.select({ n: count() }).from(dataProtectionKeys).where(elsewhere);
    await this.#reload();
    return { rewrapped, remaining: left?.n ?? 0 };
  }

  async listKeys(): Promise<DataProtectionKeyInfo[]> {
    const rows = await this.#options.db
      .select()
      .from(dataProtectionKeys)
      .where(isNull(dataProtectionKeys.revokedAt))
      .orderBy(asc(dataProtectionKeys.activatesAt));
    return rows.map((row) => ({
      id: row.id,
      protection: row.protection,
      activatesAt: row.activatesAt,
      expiresAt: row.expiresAt,
      usable: this.#unwrap(row) !== null,
    }));
  }

  #unwrap(row: typeof dataProtectionKeys.$inferSelect): Buffer | null {
    if (!this.#options.certificate)
      return row.protection === "none" ? Buffer.from(row.keyMaterial, "base64") : null;
    // a protected ring never uses bare keys, nor keys wrapped by a certificate it does not hold
    const certificate = row.certificateThumbprint
      ? this.#unwrappers.get(row.certificateThumbprint)
      : undefined;
    if (row.protection !== "rsa-oaep-sha256" || !certificate) return null;
    return unwrapRingKey(certificate, row.keyMaterial);
  }

  async #reload(): Promise<void> {
    const rows = await this.#options.db
      .select()
      .from(dataProtectionKeys)
      .where(isNull(dataProtectionKeys.revokedAt));
    const ring = new Map<string, RingKey>();
    let skipped = 0;
    for (const row of rows) {
      const cached = this.#ring.get(row.id);
      const material = cached?.material ?? this.#unwrap(row);
      if (!material) skipped++;
      ring.set(row.id, {
        id: row.id,
        material,
        activatesAt: row.activatesAt,
        expiresAt: row.expiresAt,
        createdAt: row.createdAt,
        current: this.#options.certificate === null || row.certificateThumbprint === this.#thumbprint,
      });
    }
    if (skipped > 0)
      this.#options.logger.warn("data protection: some keys cannot be unwrapped with this configuration", {
        skipped,
        protectedAtRest: this.protectedAtRest,
      });
    this.#ring = ring;
    this.#loadedAt = this.#options.clock.now().getTime();
  }

  async #ensureLoaded(force = false): Promise<void> {
    if (!force && !this.#loadedBefore(RING_REFRESH_MS)) return;
    this.#loading ??= this.#reload().finally(() => {
      this.#loading = null;
    });
    await this.#loading;
  }

  /**
   * Whether the ring was loaded more than `ms` ago, or "later" than now: loaded while the clock read
   * ahead of where it has since been put back, it would otherwise not be read again until the clock
   * caught up (a key another process made meanwhile refused, a revoked one still opening).
   */
  #loadedBefore(ms: number): boolean {
    const elapsed = this.#options.clock.now().getTime() - this.#loadedAt;
    return elapsed < 0 || elapsed >= ms;
  }

  #defaultKey(now: Date): RingKey | undefined {
    let best: RingKey | undefined;
    for (const key of this.#ring.values()) {
      // new payloads only under keys wrapped by the current certificate
      if (!key.material || !key.current || key.activatesAt > now || key.expiresAt <= now) continue;
      const later =
        !best ||
        key.activatesAt > best.activatesAt ||
        (key.activatesAt.getTime() === best.activatesAt.getTime() && key.createdAt > best.createdAt);
      if (later) best = key;
    }
    return best;
  }

  /** Inserts a key under an advisory lock; unless `force`, only when no usable key is active. */
  async #createKey(now: Date, force: boolean): Promise<string> {
    const { db, certificate, keyLifetimeDays } = this.#options;
    return db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(${KEY_CREATION_LOCK})`);
      if (!force) {
        const rows = await tx
          .select()
          .from(dataProtectionKeys)
          .where(
            and(
              isNull(dataProtectionKeys.revokedAt),
              lte(dataProtectionKeys.activatesAt, now),
              gt(dataProtectionKeys.expiresAt, now),
            ),
          );
        const usable = rows.find(
          (row) =>
            this.#unwrap(row) !== null && (!certificate || row.certificateThumbprint === this.#thumbprint),
        );
        if (usable) return usable.id;
      }
      const id = randomUUID();
      const key = randomBytes(32);
      const keyMaterial = certificate ? wrapRingKey(certificate, key) : key.toString("base64");
      await tx.insert(dataProtectionKeys).values({
        id,
        protection: certificate ? "rsa-oaep-sha256" : "none",
        certificateThumbprint: this.#thumbprint,
        keyMaterial,
        activatesAt: now,
        expiresAt: new Date(now.getTime() + keyLifetimeDays * DAY_MS),
      });
      this.#options.logger.info("data protection key created", {
        keyId: id,
        protectedAtRest: certificate !== null,
      });
      return id;
    });
  }

  async #currentKey(): Promise<RingKey> {
    await this.#ensureLoaded();
    const now = this.#options.clock.now();
    let key = this.#defaultKey(now);
    if (key) return key;
    await this.#createKey(now, false);
    await this.#ensureLoaded(true);
    key = this.#defaultKey(now);
    if (!key) throw new DataProtectionError("no data protection key is available");
    return key;
  }

  #subkey(key: RingKey, purpose: string): Buffer {
    const cacheKey = `${key.id}\u0000${purpose}`;
    let subkey = this.#subkeys.get(cacheKey);
    if (!subkey) {
      if (!key.material) throw new DataProtectionError("key is not usable");
      const info = Buffer.from(
        `plinth/data-protection/v1\u0000${this.applicationName}\u0000${purpose}`,
        "utf8",
      );
      subkey = Buffer.from(hkdfSync("sha256", key.material, uuidToBytes(key.id), info, 32));
      this.#subkeys.set(cacheKey, subkey);
    }
    return subkey;
  }

  async #protect(purpose: string, data: Uint8Array): Promise<string> {
    const key = await this.#currentKey();
    const header = Buffer.concat([Buffer.from([VERSION]), uuidToBytes(key.id)]);
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#subkey(key, purpose), nonce, {
      authTagLength: TAG_BYTES,
    });
    cipher.setAAD(header);
    const body = Buffer.concat([cipher.update(data), cipher.final(), cipher.getAuthTag()]);
    return Buffer.concat([header, nonce, body]).toString("base64url");
  }

  async #unprotect(purpose: string, payload: string): Promise<Uint8Array> {
    const bytes = /^[A-Za-z0-9_-]+$/.test(payload) ? Buffer.from(payload, "base64url") : Buffer.alloc(0);
    if (bytes.length < HEADER_BYTES + NONCE_BYTES + TAG_BYTES || bytes[0] !== VERSION)
      throw new DataProtectionError("the payload is not a protected payload");
    const keyId = bytesToUuid(bytes.subarray(1, HEADER_BYTES));
    await this.#ensureLoaded();
    // a key another process just created; throttled so forged key ids cannot hammer the database
    if (!this.#ring.has(keyId) && this.#loadedBefore(FORCED_RELOAD_GAP_MS)) await this.#ensureLoaded(true);
    const key = this.#ring.get(keyId);
    if (!key?.material) throw new DataProtectionError("the payload's key is not in the key ring");
    try {
      const decipher = createDecipheriv(
        "aes-256-gcm",
        this.#subkey(key, purpose),
        bytes.subarray(HEADER_BYTES, HEADER_BYTES + NONCE_BYTES),
        { authTagLength: TAG_BYTES },
      );
      decipher.setAAD(bytes.subarray(0, HEADER_BYTES));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      return Buffer.concat([
        decipher.update(bytes.subarray(HEADER_BYTES + NONCE_BYTES, bytes.length - TAG_BYTES)),
        decipher.final(),
      ]);
    } catch {
      throw new DataProtectionError("the payload does not open for this application and purpose");
    }
  }
}

/**
 * Builds data protection from `Security:DataProtection`. Without a certificate (Development only:
 * Production start-up refuses it) the ring stores bare keys, and says so loudly.
 */
export function createDataProtection(
  config: AppConfig,
  deps: { db: Db; clock: Clock; logger: Logger },
): DataProtection {
  const settings = config.settings.Security.DataProtection;
  let certificate: LoadedCertificate | null = null;
  let previousCertificates: LoadedCertificate[] = [];
  if (settings.CertificatePath) {
    certificate = loadCertificate(settings.CertificatePath, settings.CertificatePassword);
    previousCertificates = settings.PreviousCertificates.map((p) => loadCertificate(p.Path, p.Password));
  } else if (config.environment === "Production")
    throw new DataProtectionError("Security:DataProtection:CertificatePath is required in Production");
  else
    deps.logger.warn(
      "DATA PROTECTION KEYS ARE NOT PROTECTED AT REST: Security:DataProtection:CertificatePath is not set, so the " +
        "key ring in PostgreSQL holds bare keys. Acceptable for local Development only; Production refuses to start.",
      { environment: config.environment },
    );
  return new DataProtection({
    db: deps.db,
    applicationName: settings.ApplicationName ?? "plinth",
    certificate,
    previousCertificates,
    clock: deps.clock,
    logger: deps.logger,
    keyLifetimeDays: settings.KeyLifetimeDays,
  });
}
