import type { Ctx } from "../context.ts";
import { type DatabaseDeps, withPlatformSnapshot } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import type { CheckpointStore } from "../storage/audit-checkpoints.ts";
import {
  CHECKPOINT_FORMAT,
  type Checkpoint,
  checkpointSigningKey,
  readChainHeads,
  signCheckpoint,
} from "./checkpoint.ts";

/** The job kind that writes a checkpoint (its worker and schedule: src/loops/api-background.ts). */
export const AUDIT_CHECKPOINT = "audit.checkpoint";

export type CheckpointDeps = DatabaseDeps & Pick<Deps, "config" | "clock" | "logger">;

/**
 * Reads every chain's head in one snapshot, signs them with `Audit:Checkpoints:SigningKey` and
 * writes the checkpoint to the store (Object Lock for `Audit:Checkpoints:RetentionDays` when set).
 * Null when checkpoints are off (no key, or no bucket).
 */
export async function writeAuditCheckpoint(
  deps: CheckpointDeps,
  ctx: Ctx,
  store: CheckpointStore | null,
): Promise<{ key: string; checkpoint: Checkpoint } | null> {
  const settings = deps.config.settings.Audit.Checkpoints;
  if (!settings.SigningKey || !store) return null;
  const key = checkpointSigningKey(settings.SigningKey);
  // every chain's head on the named platform path, in one snapshot
  const chains = await withPlatformSnapshot(deps, ctx, readChainHeads);
  const at = deps.clock.now();
  const checkpoint: Checkpoint = {
    format: CHECKPOINT_FORMAT,
    keyId: settings.KeyId,
    at: at.toISOString(),
    chains,
  };
  const retainUntil =
    settings.RetentionDays > 0 ? new Date(at.getTime() + settings.RetentionDays * 86_400_000) : undefined;
  const written = await store.put(at, JSON.stringify(signCheckpoint(checkpoint, key)), retainUntil);
  deps.logger.info("audit checkpoint written", { key: written, chains: chains.length });
  return { key: written, checkpoint };
}
