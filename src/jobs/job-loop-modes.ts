/**
 * The job loop's modes (`JobLoop.mode`, src/jobs/job-loop.ts) and the moves between them; `assertMove`
 * refuses any other:
 *
 *   idle ──start()──▶ starting ──LISTEN set up (or given up)──▶ claiming
 *   claiming ──a claim came back short, no wake-up meanwhile──▶ waiting
 *   waiting ──NOTIFY, poll tick or wake()──▶ claiming
 *   claiming | waiting ──a statement failed──▶ backoff ──one second──▶ claiming
 *   starting | claiming | waiting | backoff ──stop()──▶ stopping ──drained──▶ stopped
 *
 * - idle: built, not started; nothing is sent.
 * - starting: LISTEN on the jobs channel is being set up (5 s at most); nothing is sent yet.
 * - claiming: there may be due jobs: each statement claims as many as there are free places (and
 *   room in the local queue, below), and another goes as soon as a place frees, so a backlog drains
 *   at full speed.
 * - waiting: the last claim found fewer jobs than asked; outcomes are written by statements of
 *   their own until something says there may be work again.
 * - backoff: the database failed a statement; nothing is claimed for a second (the completer
 *   tries its writes again on its own).
 * - stopping: no claims; running jobs get the stop's timeout to finish, the rest are aborted and
 *   released (attempt not counted, due at once), and every outcome is written.
 * - stopped: done; start() does nothing.
 */
import type { JobLoopMode } from "./job-loop-options.ts";

/** The modes each mode may be entered from: the moves drawn at the top of this file. */
const ENTERED_FROM: Record<JobLoopMode, readonly JobLoopMode[]> = {
  idle: [],
  starting: ["idle"],
  claiming: ["starting", "waiting", "backoff"],
  waiting: ["claiming"],
  backoff: ["claiming", "waiting"],
  stopping: ["starting", "claiming", "waiting", "backoff"],
  stopped: ["stopping"],
};

/** Throws unless the diagram above draws a move from `from` to `to`. */
export function assertMove(from: JobLoopMode, to: JobLoopMode): void {
  if (!ENTERED_FROM[to].includes(from)) throw new Error(`job loop: no move from ${from} to ${to}`);
}
