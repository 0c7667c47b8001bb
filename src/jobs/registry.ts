import { z } from "zod";

/** What a handler gets besides its payload. */
export interface JobContext {
  id: number;
  kind: string;
  /** 1 on the first run. */
  attempt: number;
  maxAttempts: number;
  /** Fires before the lease ends (and on shutdown): stop and throw, the job is retried. */
  signal: AbortSignal;
}

export type JobHandler<P> = (payload: P, context: JobContext) => Promise<void> | void;

/** A job kind: its name, the zod schema of its payload and the code that runs it. */
export interface JobDefinition<S extends z.ZodType = z.ZodType> {
  kind: string;
  schema: S;
  handler: JobHandler<z.output<S>>;
  /** Overrides `BackgroundProcessing:JobMaxAttempts` for this kind. */
  maxAttempts?: number;
}

const KIND = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/;

export function defineJob<S extends z.ZodType>(
  kind: string,
  schema: S,
  handler: JobHandler<z.output<S>>,
  options: { maxAttempts?: number } = {},
): JobDefinition<S> {
  if (!KIND.test(kind)) throw new Error(`job kind "${kind}" must be dotted lower-case words`);
  return { kind, schema, handler, maxAttempts: options.maxAttempts };
}

/** The kinds one process can run. It claims only these, so a rolling deploy that adds a kind is safe. */
export class JobRegistry {
  readonly #definitions = new Map<string, JobDefinition>();

  constructor(definitions: JobDefinition[] = []) {
    for (const definition of definitions) this.register(definition);
  }

  register(definition: JobDefinition): this {
    if (this.#definitions.has(definition.kind))
      throw new Error(`job kind "${definition.kind}" is registered twice`);
    this.#definitions.set(definition.kind, definition);
    return this;
  }

  get(kind: string): JobDefinition | undefined {
    return this.#definitions.get(kind);
  }

  kinds(): string[] {
    return [...this.#definitions.keys()];
  }
}

/** Does nothing: for benchmarks and smoke tests. */
export const systemNoop = defineJob("system.noop", z.object({}).passthrough(), () => {});

/** The registry with Plinth's built-in kinds; areas add theirs. */
export function createJobRegistry(definitions: JobDefinition[] = []): JobRegistry {
  return new JobRegistry([systemNoop, ...definitions]);
}
