import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { withPlatformSnapshot } from "../../src/db/operation.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/database.ts";

/**
 * A read-only scoped transaction (withPlatformSnapshot: audit:verify, checkpoints) returns before its
 * COMMIT is answered; its connection goes back to the pool once it is. A close in that moment used to
 * wait out the whole close timeout (5 s: `bun run audit:verify` took 5.4 s for a 0.1 s walk), as
 * postgres.js ends a connection still reserved only when the timeout destroys it.
 */
const t = useTestDatabase();

test("a close right after a read-only snapshot ends the pool once the COMMIT is answered, not at the close timeout", async () => {
  const database = await openTestDatabase(t.url, { poolSize: 2 });
  const rows = await withPlatformSnapshot({ database }, systemCtx("test"), (tx) =>
    execute<{ one: number }>(tx, sql`select 1 as one`),
  );
  expect(rows).toEqual([{ one: 1 }]);
  const started = performance.now();
  await database.close(5);
  // the close timeout is 5 s; the COMMIT's answer takes a few milliseconds
  expect(performance.now() - started).toBeLessThan(2_500);
});
