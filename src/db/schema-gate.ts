import { sql } from "drizzle-orm";
import { type Db, execute } from "./client.ts";
import { readMigrations } from "./migrator.ts";

/**
 * The schema gate: the migrations this code ships (drizzle/) against those applied
 * (`schema_migrations`). `pending`: shipped, not applied (the database is behind; the code would
 * fail on missing tables). `unknown`: applied, not shipped (a newer release migrated the database,
 * as during a rolling upgrade; this code runs beside additive changes).
 */
export interface SchemaState {
  pending: string[];
  unknown: string[];
}

export async function compareSchema(
  db: Db,
  shipped: string[] = readMigrations().map((m) => m.tag),
): Promise<SchemaState> {
  const [table] = await execute<{ found: string | null }>(
    db,
    sql`select to_regclass('schema_migrations')::text as found`,
  );
  const applied = table?.found
    ? (await execute<{ tag: string }>(db, sql`select tag from schema_migrations order by tag`)).map(
        (row) => row.tag,
      )
    : [];
  const appliedSet = new Set(applied);
  const shippedSet = new Set(shipped);
  return {
    pending: shipped.filter((tag) => !appliedSet.has(tag)),
    unknown: applied.filter((tag) => !shippedSet.has(tag)),
  };
}

/** "2 migrations pending: run `bun run migrate`", the sentence start-up and readiness use. */
export function pendingSentence(pending: string[]): string {
  return `${pending.length} migration${pending.length === 1 ? "" : "s"} pending: run \`bun run migrate\``;
}

export class MigrationsPendingError extends Error {
  constructor(readonly pending: string[]) {
    super(pendingSentence(pending));
  }
}

export interface SchemaGate {
  /** Compares now; releases `whenCurrent` once nothing is pending. Rejects when the database fails. */
  check(): Promise<SchemaState>;
  /** The last comparison's result; null before the first one succeeded. */
  readonly last: SchemaState | null;
  /** Resolves true once a check found nothing pending, false if the gate was stopped first. */
  whenCurrent(): Promise<boolean>;
  /** Checks every `intervalMs` until current (or stopped); `onError` hears each failed check. */
  watch(intervalMs: number, onError: (error: unknown) => void): void;
  stop(): void;
}

export function createSchemaGate(db: Db, options: { dir?: string } = {}): SchemaGate {
  // read once: the files do not change under a running process
  const shipped = readMigrations(options.dir).map((m) => m.tag);
  let last: SchemaState | null = null;
  let current = false;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let release: (value: boolean) => void = () => {};
  const ready = new Promise<boolean>((resolve) => {
    release = resolve;
  });
  const gate: SchemaGate = {
    async check() {
      const state = await compareSchema(db, shipped);
      last = state;
      if (state.pending.length === 0 && !current) {
        current = true;
        clearTimeout(timer);
        release(true);
      }
      return state;
    },
    get last() {
      return last;
    },
    whenCurrent: () => ready,
    watch(intervalMs, onError) {
      const tick = () => {
        if (stopped || current) return;
        timer = setTimeout(async () => {
          await gate.check().catch(onError);
          tick();
        }, intervalMs);
      };
      tick();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      release(false);
    },
  };
  return gate;
}
