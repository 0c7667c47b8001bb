import { randomUUID } from "node:crypto";
import { hostname } from "node:os";

/** Who holds a lease, in every loop's rows (`locked_by`): `<host>:<pid>:<random>`, new per call. */
export function workerId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}
