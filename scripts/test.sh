#!/usr/bin/env bash
# The README's test command (`npm test`): the whole suite on the single topology (one PostgreSQL,
# one Redis) in PLINTH_TEST_WORKERS worker processes (`bun test --parallel`, default 2: each file
# works in a database and a key prefix of its own), and beside it, in a bun process of its own, the
# job-queue, auth, rate-limit and cache files again on the scaled topology (PLINTH_TEST_TOPOLOGY=scaled:
# PgBouncer in transaction mode with the direct URL beside it, and a Redis Cluster; docs/scaling.md).
# The single run's output streams; the scaled run's is printed when both have ended. Ends with the
# counts of both runs together. With arguments, runs just those (`npm test -- tests/unit`), in one
# process, on the topology PLINTH_TEST_TOPOLOGY names.
set -uo pipefail
cd "$(dirname "$0")/.."
sh scripts/setup.sh --services || exit 1

if [ "$#" -gt 0 ]; then exec bun test --timeout 30000 "$@"; fi

SCALED_FILES=(
  tests/integration/jobs-queue.test.ts
  tests/integration/jobs-loop.test.ts
  tests/integration/jobs-loop-modes.test.ts
  tests/integration/jobs-run-job.test.ts
  tests/integration/auth-flows.test.ts
  tests/integration/auth-sessions.test.ts
  tests/integration/auth-windows.test.ts
  tests/integration/auth-tokens.test.ts
  tests/integration/api-keys.test.ts
  tests/integration/audit-chain.test.ts
  tests/integration/rate-limit.test.ts
  tests/integration/rate-batch.test.ts
  tests/integration/rate-leases.test.ts
  tests/integration/cache-adapters.test.ts
  tests/integration/cache-outage.test.ts
  tests/integration/security-windows.test.ts
  tests/integration/read-through.test.ts
  tests/integration/output-cache.test.ts
  tests/integration/tenant-rls.test.ts
  tests/integration/tenant-rate-limit.test.ts
  tests/integration/connection-cut.test.ts
)

workers=${PLINTH_TEST_WORKERS:-2}
single=$(mktemp)
scaled=$(mktemp)
scaled_pid=
# an interrupted run leaves no scaled run behind
trap '[ -z "$scaled_pid" ] || kill "$scaled_pid" 2>/dev/null; rm -f "$single" "$scaled"' EXIT
PLINTH_TEST_TOPOLOGY=scaled bun test --timeout 30000 "${SCALED_FILES[@]}" >"$scaled" 2>&1 &
scaled_pid=$!
bun test --timeout 30000 --parallel="$workers" 2>&1 | tee "$single"
single_status=${PIPESTATUS[0]}
wait "$scaled_pid"
scaled_status=$?
scaled_pid=
echo "== the same job-queue, auth, rate-limit and cache files on PgBouncer + Redis Cluster (run beside the one above)"
cat "$scaled"

count() { grep -Eo "^ *[0-9]+ $1\$" "$2" | tail -1 | grep -Eo '[0-9]+' || echo 0; }
echo "== both topologies"
echo " $(($(count pass "$single") + $(count pass "$scaled"))) pass"
echo " $(($(count fail "$single") + $(count fail "$scaled"))) fail"
[ "$single_status" -eq 0 ] && [ "$scaled_status" -eq 0 ]
