import type { Outcome } from "./completer.ts";
import { describeIssues } from "./enqueue.ts";
import type { ClaimedJob } from "./queue.ts";
import { LEASE_MS } from "./queue.ts";
import { type BatchItem, JobTimeoutError } from "./registry.ts";
import { abortMargin, checkedResult, failure, type RunJobDeps, type RunJobInput } from "./run-job.ts";

/** A batch under way: one outcome per job (in the jobs' order), and when its handler is done. */
export interface RunningBatch {
  outcomes: Promise<Outcome>[];
  /** The handler's own end. Never rejects. */
  handled: Promise<void>;
}

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Runs claimed jobs of one batch kind in one call of its batch handler (`startJob` for a batch):
 * a job whose payload no longer matches the schema, or whose last attempt's lease expired, is dead
 * at once and left out of the call; the others get the handler's verdict one by one — its settled
 * result for each (succeeded with that result, or failed and retried alone with its own backoff),
 * all succeeded when it returns nothing, all failed when it throws, times out or returns anything
 * else. Writes nothing (the completer does).
 */
export function startBatch(
  deps: RunJobDeps,
  input: Omit<RunJobInput, "job"> & { jobs: ClaimedJob[] },
): RunningBatch {
  const { jobs } = input;
  const one = (job: ClaimedJob): RunJobInput => ({ ...input, job });
  const definition = input.registry.get(jobs[0]?.kind ?? "");
  const at = (outcome: Outcome) => Promise.resolve(outcome);
  if (!definition?.batchHandler) {
    const error = new Error(`no batch handler for job kind "${jobs[0]?.kind}" in this process`);
    return { outcomes: jobs.map((job) => at(failure(deps, one(job), error, 0))), handled: Promise.resolve() };
  }
  const handler = definition.batchHandler;
  const early = new Map<number, Outcome>();
  const items: BatchItem<unknown>[] = [];
  const valid: ClaimedJob[] = [];
  for (const job of jobs) {
    if (job.attempts > job.maxAttempts) {
      const reason = `the lease of attempt ${job.maxAttempts} of ${job.maxAttempts} expired: the process running it stopped`;
      early.set(job.id, { type: "dead", job, reason });
      continue;
    }
    const parsed = definition.schema.safeParse(job.payload);
    if (!parsed.success) {
      const issues = describeIssues(parsed.error).map((i) => `${i.path}: ${i.message}`);
      const reason = `payload does not match the schema of job kind "${job.kind}": ${issues.join("; ")}`;
      early.set(job.id, { type: "dead", job, reason: deps.redactor.text(reason) });
      continue;
    }
    valid.push(job);
    items.push({ id: job.id, payload: parsed.data, attempt: job.attempts, maxAttempts: job.maxAttempts });
  }
  if (valid.length === 0)
    return { outcomes: jobs.map((job) => at(early.get(job.id) as Outcome)), handled: Promise.resolve() };
  const controller = input.controller ?? new AbortController();
  const { signal } = controller;
  const timers: ReturnType<typeof setTimeout>[] = [];
  if (input.leaseTimer !== false) {
    const until = Math.min(...valid.map((j) => j.lockedUntil.getTime()));
    const remaining = until - deps.clock.now().getTime() - abortMargin(input.leaseMs ?? LEASE_MS);
    timers.push(
      setTimeout(
        () => controller.abort(new Error("the job's lease is about to end")),
        Math.max(0, remaining),
      ),
    );
  }
  const { timeoutMs } = definition;
  if (timeoutMs !== undefined)
    timers.push(
      setTimeout(() => controller.abort(new JobTimeoutError(definition.kind, timeoutMs)), timeoutMs),
    );
  const timedOut = new Promise<Settled>((resolve) => {
    const check = () => {
      if (signal.reason instanceof JobTimeoutError) resolve({ ok: false, error: signal.reason });
    };
    signal.addEventListener("abort", check, { once: true });
  });
  const startedAt = performance.now();
  const running: Promise<Settled> = (async () => handler(items, { kind: definition.kind, signal }))().then(
    (value: unknown) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  const handled = running.then(() => {
    for (const timer of timers) clearTimeout(timer);
  });
  const verdicts = Promise.race([running, timedOut]).then((settled): Outcome[] => {
    const durationMs = performance.now() - startedAt;
    const failAll = (error: unknown) => valid.map((job) => failure(deps, one(job), error, durationMs));
    if (signal.reason instanceof JobTimeoutError) return failAll(signal.reason);
    if (!settled.ok) return failAll(settled.error);
    const { value } = settled;
    if (value === undefined || value === null)
      return valid.map((job): Outcome => ({ type: "succeeded", job, startedAt }));
    if (!Array.isArray(value) || value.length !== valid.length)
      return failAll(
        new TypeError(`a batch handler returns nothing or one settled result per item (${valid.length})`),
      );
    return valid.map((job, i): Outcome => {
      const entry = value[i] as PromiseSettledResult<unknown> | undefined;
      if (entry?.status === "rejected") return failure(deps, one(job), entry.reason, durationMs);
      if (entry?.status !== "fulfilled")
        return failure(
          deps,
          one(job),
          new TypeError("a batch item's result must be a settled result"),
          durationMs,
        );
      const checked = checkedResult(entry.value);
      return checked.ok
        ? { type: "succeeded", job, startedAt, result: checked.result }
        : failure(deps, one(job), checked.error, durationMs);
    });
  });
  const index = new Map(valid.map((job, i) => [job.id, i]));
  const outcomes = jobs.map((job) => {
    const done = early.get(job.id);
    if (done) return at(done);
    return verdicts.then((all) => all[index.get(job.id) as number] as Outcome);
  });
  return { outcomes, handled };
}
