import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from "node:crypto";
import { sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";
import { canonicalJson, PLATFORM_CHAIN } from "./chain.ts";

/**
 * A signed audit checkpoint: every chain's head as the database had it at one moment, signed with a
 * key the database never holds (`Audit:Checkpoints:SigningKey`, Ed25519), kept outside it (object
 * storage, docs/audit.md). A writer of the database can rewrite a chain consistently (trim its
 * tail and move `audit_chains` back, delete it, delete a tenant with it) but cannot make the
 * checkpoints outside agree: `audit:verify` compares the chains with the latest one.
 */
export const CHECKPOINT_FORMAT = "plinth.audit.checkpoint.v1";

export interface CheckpointChain {
  /** A tenant id, or `platform`. */
  chain: string;
  /** The tenant's code when the checkpoint was made (null: the platform chain, or a tenant gone). */
  tenantCode: string | null;
  headId: number | null;
  headHash: string;
  rows: number;
}

export interface Checkpoint {
  format: typeof CHECKPOINT_FORMAT;
  keyId: string;
  /** When the heads were read (ISO 8601). */
  at: string;
  chains: CheckpointChain[];
}

export interface SignedCheckpoint {
  checkpoint: Checkpoint;
  /** Ed25519 over the canonical JSON of `checkpoint`, base64url. */
  signature: string;
}

/** Every chain's head, tenant code and row count in one snapshot (the caller's transaction). */
export async function readChainHeads(tx: Executor): Promise<CheckpointChain[]> {
  const rows = await execute<{
    chain: string;
    tenant_code: string | null;
    head_id: string | null;
    head_hash: string;
    rows: string;
  }>(
    tx,
    sql`select c.chain, t.code as tenant_code, c.head_id::text, c.head_hash, coalesce(n.rows, 0)::text as rows
        from audit_chains c
        left join tenants t on c.chain <> ${PLATFORM_CHAIN} and t.id::text = c.chain
        left join (select coalesce(tenant_id::text, ${PLATFORM_CHAIN}) as chain, count(*) as rows
                   from audit_events group by 1) n on n.chain = c.chain
        order by c.chain`,
  );
  return rows.map((r) => ({
    chain: r.chain,
    tenantCode: r.tenant_code,
    headId: r.head_id === null ? null : Number(r.head_id),
    headHash: r.head_hash,
    rows: Number(r.rows),
  }));
}

/** The signing key of `Audit:Checkpoints:SigningKey`: Ed25519 only. */
export function checkpointSigningKey(pem: string): KeyObject {
  const key = createPrivateKey(pem);
  if (key.asymmetricKeyType !== "ed25519")
    throw new Error(`Audit:Checkpoints:SigningKey must be an Ed25519 key, not ${key.asymmetricKeyType}`);
  return key;
}

/** The key that verifies: the configured public key, else the signing key's public half. */
export function checkpointVerifyKey(settings: { SigningKey?: string; VerifyKey?: string }): KeyObject | null {
  if (settings.VerifyKey) return createPublicKey(settings.VerifyKey);
  if (settings.SigningKey) return createPublicKey(checkpointSigningKey(settings.SigningKey));
  return null;
}

export function signCheckpoint(checkpoint: Checkpoint, key: KeyObject): SignedCheckpoint {
  const signature = sign(null, Buffer.from(canonicalJson(checkpoint)), key).toString("base64url");
  return { checkpoint, signature };
}

/** The checkpoint when `signed` parses and its signature verifies under `key`; else why not. */
export function openCheckpoint(text: string, key: KeyObject): { checkpoint: Checkpoint } | { error: string } {
  let signed: SignedCheckpoint;
  try {
    signed = JSON.parse(text) as SignedCheckpoint;
  } catch {
    return { error: "not JSON" };
  }
  if (signed?.checkpoint?.format !== CHECKPOINT_FORMAT || typeof signed.signature !== "string")
    return { error: `not a ${CHECKPOINT_FORMAT}` };
  const ok = verify(
    null,
    Buffer.from(canonicalJson(signed.checkpoint)),
    key,
    Buffer.from(signed.signature, "base64url"),
  );
  return ok ? { checkpoint: signed.checkpoint } : { error: "its signature does not verify" };
}
