import { afterAll } from "bun:test";
import type { Subprocess } from "bun";

/**
 * Every child process the tests of this run started and that has not exited yet. The helpers that
 * spawn (`runEntry`, `startApi`, `spawnBun`, `ownRedisServer`, `ownRedisCluster`) and the tests that
 * call `Bun.spawn` themselves hand each child to `tracked`; `stopChildren` ends the ones still
 * running. `useTestApp` and `useTestDatabase` call it in their `afterAll`, so a file's processes end
 * with the file; a file with neither calls `stopChildrenAfterAll()`.
 */
const live = new Set<Subprocess>();

/** Remembers `proc` until it exits, so the file's teardown can stop it; returns it unchanged. */
export function tracked<T extends Subprocess>(proc: T): T {
  live.add(proc);
  void proc.exited.then(() => live.delete(proc));
  return proc;
}

/** SIGTERM to every child still running; SIGKILL to those still there after `graceMs`. */
export async function stopChildren(graceMs = 5_000): Promise<void> {
  const running = [...live].filter((proc) => proc.exitCode === null && proc.signalCode === null);
  for (const proc of running) proc.kill("SIGTERM");
  await Promise.all(
    running.map(async (proc) => {
      const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
      await proc.exited;
      clearTimeout(timer);
    }),
  );
}

/** For a file that starts processes without the test harness: they are stopped when it ends. */
export function stopChildrenAfterAll(): void {
  afterAll(() => stopChildren(), 30_000);
}

// the last resort when the test process ends without its afterAll hooks (a crash, an abort)
process.on("exit", () => {
  for (const proc of live) proc.kill("SIGKILL");
});
