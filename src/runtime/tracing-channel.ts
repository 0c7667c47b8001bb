import diagnostics from "node:diagnostics_channel";

/**
 * `TracingChannel#hasSubscribers` for runtimes that lack it (Bun 1.4 has the channels but not this
 * getter; Node has it since 20.13). Libraries ask it before tracing each call: ioredis traces every
 * command unless it reads `false` (`hasSubscribers !== false`), so under Bun each cache command
 * paid for a traced promise and a copy of its arguments with nobody listening (3 % of an
 * authenticated request's CPU). Defined as Node defines it: any of the five channels has a
 * subscriber. Idempotent; does nothing where the runtime has its own.
 */
export function ensureTracingChannelHasSubscribers(): void {
  const channel = diagnostics.tracingChannel("plinth:probe");
  const prototype = Object.getPrototypeOf(channel) as object;
  if ("hasSubscribers" in channel) return;
  Object.defineProperty(prototype, "hasSubscribers", {
    configurable: true,
    get(this: Record<"start" | "end" | "asyncStart" | "asyncEnd" | "error", diagnostics.Channel>) {
      return (
        this.start.hasSubscribers ||
        this.end.hasSubscribers ||
        this.asyncStart.hasSubscribers ||
        this.asyncEnd.hasSubscribers ||
        this.error.hasSubscribers
      );
    },
  });
}

ensureTracingChannelHasSubscribers();
