import { systemCtx } from "../context.ts";
import { enqueueDueSlots, type ScheduleDefinition, seedSchedules } from "../jobs/schedules.ts";
import type { LoopFactory } from "./background.ts";
import { startIntervalLoop } from "./interval-loop.ts";

/**
 * The schedules loop (`BackgroundProcessing:SchedulesEnabled`): seeds the schedules defined in code
 * (existing rows win), then every second enqueues the due slots (`enqueueDueSlots`).
 */
export function schedulesLoop(
  options: { schedules?: ScheduleDefinition[]; intervalMs?: number } = {},
): LoopFactory {
  return async (deps) => {
    const ctx = systemCtx("schedules");
    await seedSchedules(deps, ctx, { schedules: options.schedules ?? [] });
    return startIntervalLoop(deps, "schedules", {
      intervalMs: options.intervalMs ?? 1_000,
      step: async () => {
        await enqueueDueSlots(deps, ctx, { now: deps.clock.now() });
        return false;
      },
    });
  };
}
