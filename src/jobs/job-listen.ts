import type { Database } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";
import { JOB_CANCEL_CHANNEL, JOBS_CHANNEL } from "./enqueue.ts";

const LISTEN_TIMEOUT_MS = 5_000;

/**
 * LISTEN on the jobs channel (an enqueue wakes the loop) and the cancel channel (an admin canceled
 * a run, payload `<id>:<attempts>`), both or neither, within five seconds. Returns the unlisten, or
 * undefined when the loop must poll: cancels then arrive by heartbeat, wake-ups by polling.
 */
export async function listenForJobs(
  database: Database,
  log: Logger,
  handlers: { pollMs: number; wake: () => void; canceled: (payload: string) => void },
): Promise<(() => Promise<void>) | undefined> {
  if (!database.sessions) {
    log.info("job loop polls: LISTEN needs DATABASE_DIRECT_URL beside a transaction pooler", {
      pollMs: handlers.pollMs,
    });
    return undefined;
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const both = Promise.allSettled([
      database.listen(JOBS_CHANNEL, () => handlers.wake()),
      database.listen(JOB_CANCEL_CHANNEL, (payload) => handlers.canceled(payload)),
    ]);
    const results = await Promise.race([
      both,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("LISTEN timed out")), LISTEN_TIMEOUT_MS);
      }),
    ]);
    const unlistens = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const unlistenAll = async () => {
      await Promise.allSettled(unlistens.map((unlisten) => unlisten()));
    };
    const failed = results.find((r) => r.status === "rejected");
    if (failed) {
      await unlistenAll();
      throw failed.reason;
    }
    return unlistenAll;
  } catch (error) {
    log.warn("LISTEN on the jobs channels failed; polling only (cancels by heartbeat)", { error });
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
