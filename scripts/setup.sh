#!/usr/bin/env sh
# Makes this checkout runnable: Bun (from the npm registry) and the packages; with --services also
# Deno (npm registry, for the Deno smoke test), a PostgreSQL and a Redis on localhost for the test suite (used when running, installed from
# Debian's packages and started when missing) and Chromium (Debian's, for the offline /api/docs test).
# Idempotent: quick when everything is there.
set -eu
cd "$(dirname "$0")/.."
BUN_VERSION=1.4.4
DENO_VERSION=2.9.6

say() { printf 'setup: %s\n' "$*" >&2; }
# Installing Debian packages and starting system services needs root: run as root, this does it; run
# as another user it uses no sudo, it stops and names what to install or start (then run it again).
as_root() {
  [ "$(id -u)" = 0 ] && { "$@"; return; }
  say "this step needs root: $*"
  say "run it as root (or install/start that yourself), then run scripts/setup.sh again"
  exit 1
}

if ! command -v bun >/dev/null 2>&1; then
  say "installing Bun $BUN_VERSION from the npm registry"
  npm install -g "bun@$BUN_VERSION" >/dev/null 2>&1 || {
    say "npm cannot install Bun into its global folder (not writable by $(id -un)?): install Bun $BUN_VERSION"
    say "yourself (as root: npm install -g bun@$BUN_VERSION; or npm config set prefix ~/.local and put"
    say "~/.local/bin on PATH), then run scripts/setup.sh again"
    exit 1
  }
fi
if [ ! -d node_modules ] || [ bun.lock -nt node_modules/.bun-installed ]; then
  bun install --frozen-lockfile >&2
  touch node_modules/.bun-installed
fi
# `npm run dev` copies a new embedded database from a migrated template instead of running initdb and
# every migration in the API process (docs/performance.md, "Cold start"): made here once per PGlite
# release and set of migrations, into .cache/pglite.
bun scripts/pglite-template.ts || say "no embedded database template made: a new ./.data/dev runs initdb and the migrations itself"

[ "${1:-}" = "--services" ] || exit 0

# Deno runs the same app in one smoke test (tests/e2e/deno.test.ts): from the npm registry into
# .cache/deno (the package carries the binary; its install script is not needed).
if ! command -v deno >/dev/null 2>&1 && [ ! -x .cache/deno/node_modules/.bin/deno ]; then
  say "installing Deno $DENO_VERSION from the npm registry into .cache/deno"
  mkdir -p .cache/deno
  npm install --prefix .cache/deno --no-save --no-audit --no-fund "deno@$DENO_VERSION" >/dev/null 2>&1 ||
    { say "installing Deno failed"; exit 1; }
fi

apt_updated=
apt_install() {
  [ "$(id -u)" = 0 ] || { say "missing: $* (install as root: apt-get install -y $*), then run scripts/setup.sh again"; exit 1; }
  [ -n "$apt_updated" ] || { as_root apt-get update -qq >&2; apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >&2
}

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
if ! command -v pg_isready >/dev/null 2>&1 || ! pg_up; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    say "installing PostgreSQL"
    apt_install postgresql
  fi
  if ! pg_up; then
    say "starting PostgreSQL"
    version=$(ls /etc/postgresql | sort -n | tail -1)
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
  fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do pg_up && break; sleep 1; done
  pg_up || { say "PostgreSQL is not answering on 127.0.0.1:5432"; exit 1; }
fi
# The suite connects as postgres over TCP; a fresh Debian cluster wants a password there.
if [ -z "${PLINTH_TEST_DATABASE_URL:-}" ] && ! psql -h 127.0.0.1 -U postgres -Atqc 'select 1' postgres >/dev/null 2>&1; then
  say "PostgreSQL refuses passwordless TCP login for postgres; trusting local TCP connections"
  hba=$(as_root su postgres -c "psql -Atqc 'show hba_file'")
  as_root sh -c "sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' '$hba'"
  as_root su postgres -c "psql -qc 'select pg_reload_conf()'" >/dev/null
fi

redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if ! command -v redis-cli >/dev/null 2>&1 || ! redis_up; then
  command -v redis-server >/dev/null 2>&1 || { say "installing Redis"; apt_install redis-server; }
  if ! redis_up; then
    say "starting Redis"
    mkdir -p /tmp/plinth-redis
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp/plinth-redis >&2
  fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do redis_up && break; sleep 1; done
  redis_up || { say "Redis is not answering on 127.0.0.1:6379"; exit 1; }
fi
say "PostgreSQL and Redis are up"

# The scaled topology of the suite (docs/scaling.md, PLINTH_TEST_TOPOLOGY=scaled): PgBouncer in
# transaction mode on 127.0.0.1:6432 in front of that PostgreSQL, and a Redis Cluster of three
# masters with one replica each on 127.0.0.1:7000-7005 (no persistence).
sh scripts/scaled-services.sh

# Chromium renders /api/docs offline in tests/e2e/docs-offline.test.ts (driven by playwright-core
# from npm, which brings no browser of its own): Debian's package, at /usr/bin/chromium.
if [ ! -x /usr/bin/chromium ]; then
  say "installing Chromium"
  apt_install chromium
fi

# Prometheus (server and promtool) scrapes a running Plinth in tests/e2e/prometheus.test.ts, which
# also runs `promtool check rules` / `promtool test rules` on deploy/prometheus/; Caddy fronts the API
# in the first-install runbook's test. Debian's packages; their services are not used (the tests
# start their own processes), so a systemd start that fails in a container does not matter.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  say "installing Prometheus"
  apt_install prometheus
fi
if ! command -v caddy >/dev/null 2>&1; then
  say "installing Caddy"
  apt_install caddy
fi

# wrk loads the servers in the HTTP benchmarks (bun run bench:http, bench/ab-trees.ts): Debian's package.
if ! command -v wrk >/dev/null 2>&1; then
  say "installing wrk"
  apt_install wrk
fi

# The client generators the contract tests run (tests/integration/generated-clients.test.ts, and
# `bun run openapi:types`) need TypeScript 5's compiler API, which the project's TypeScript 7 lacks:
# npx runs them with their own TypeScript. Fetched here once, so the tests find them in npx's cache.
if command -v npx >/dev/null 2>&1; then
  say "caching the OpenAPI client generators (npx)"
  npx --yes -p typescript@5.9 -p @hey-api/openapi-ts@0.99.0 openapi-ts --version >/dev/null 2>&1 || true
  npx --yes -p typescript@5.9 -p openapi-typescript@7.13.0 openapi-typescript --version >/dev/null 2>&1 || true
fi
