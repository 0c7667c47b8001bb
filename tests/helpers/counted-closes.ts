import type { Database } from "../../src/db/client.ts";

/** An application pool under test, named for pg_stat_activity, and the closes its driver saw. */
export interface CountedPool {
  app: Database;
  name: string;
  /** Connections of the app's pool the driver saw close (postgres.js's `onclose`). */
  closes: number;
}

/** Counts the pool's closed connections through the driver's documented `onclose` hook, read at each close. */
export function countedCloses(app: Database, name: string): CountedPool {
  const opened: CountedPool = { app, name, closes: 0 };
  const client = (app.db as unknown as { $client: { options: { onclose?: () => void } } }).$client;
  client.options.onclose = () => {
    opened.closes++;
  };
  return opened;
}
