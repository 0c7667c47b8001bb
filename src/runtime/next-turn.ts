/**
 * Runs `fn` once the current turn of the event loop is done (after its I/O callbacks and their
 * microtasks): `setImmediate` where the runtime has it (Bun, Node, Deno), else a zero timeout.
 * Work gathered during a turn (log lines, rate-limit requests) is handled there in one go.
 */
export const nextTurn: (fn: () => void) => void =
  typeof setImmediate === "function" ? (fn) => void setImmediate(fn) : (fn) => void setTimeout(fn, 0);
