#!/usr/bin/env sh
# Starts the scaled topology the suite runs its job, auth, rate-limit and cache files against a
# second time (PLINTH_TEST_TOPOLOGY=scaled, docs/scaling.md): Debian's PgBouncer in transaction
# mode on 127.0.0.1:6432 in front of PostgreSQL on 127.0.0.1:5432, and a Redis Cluster (three
# masters, one replica each) on 127.0.0.1:7000-7005. Installs PgBouncer when missing. Idempotent:
# quick when both are up. Called by scripts/setup.sh --services.
set -eu
say() { printf 'setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else say "need root for: $*"; exit 1; fi; }

PGB_PORT=${PLINTH_PGBOUNCER_PORT:-6432}
PGB_DIR=/tmp/plinth-pgbouncer
CLUSTER_PORTS="7000 7001 7002 7003 7004 7005"
CLUSTER_DIR=/tmp/plinth-redis-cluster

pgb_up() { psql -h 127.0.0.1 -p "$PGB_PORT" -U postgres -Atqc 'select 1' postgres >/dev/null 2>&1; }
# auth_type = trust with an auth file: each client passes through as its own user (trust on loopback,
# like the PostgreSQL it fronts), so the API's row-level-security role (plinth_app) is itself behind
# the pooler too; `*` forwards any database name (tests make their own)
pgb_config() {
  cat <<INI
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 10
max_db_connections = 20
server_idle_timeout = 30
ignore_startup_parameters = extra_float_digits,options
logfile = $PGB_DIR/pgbouncer.log
pidfile = $PGB_DIR/pgbouncer.pid
admin_users = postgres
INI
}
pgb_write_config() {
  mkdir -p "$PGB_DIR"
  chmod 755 "$PGB_DIR"
  pgb_config >"$PGB_DIR/pgbouncer.ini"
  printf '"postgres" ""\n"plinth_app" ""\n' >"$PGB_DIR/userlist.txt"
  chmod 644 "$PGB_DIR/pgbouncer.ini" "$PGB_DIR/userlist.txt"
  if [ "$(id -u)" = 0 ]; then chown -R postgres "$PGB_DIR"; fi
}
if pgb_up && ! pgb_config | cmp -s - "$PGB_DIR/pgbouncer.ini"; then
  # an older configuration (every client as postgres): rewrite it and reload, keeping connections
  say "reloading PgBouncer with pass-through users"
  pgb_write_config
  kill -HUP "$(cat "$PGB_DIR/pgbouncer.pid")"
  sleep 1
fi
if ! pgb_up; then
  if [ ! -x /usr/sbin/pgbouncer ]; then
    say "installing PgBouncer"
    as_root apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq pgbouncer >&2
    # the package's own service (started where systemd runs) would hold 127.0.0.1:6432 with an
    # empty configuration: the suite runs its own instance instead
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet pgbouncer 2>/dev/null; then
      as_root systemctl disable --now pgbouncer >&2 || true
    fi
  fi
  say "starting PgBouncer (transaction pooling) on 127.0.0.1:$PGB_PORT"
  pgb_write_config
  if [ "$(id -u)" = 0 ]; then
    # PgBouncer refuses to run as root
    /usr/sbin/pgbouncer -d -u postgres "$PGB_DIR/pgbouncer.ini" >&2
  else
    /usr/sbin/pgbouncer -d "$PGB_DIR/pgbouncer.ini" >&2
  fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do pgb_up && break; sleep 1; done
  pgb_up || { say "PgBouncer is not answering on 127.0.0.1:$PGB_PORT (see $PGB_DIR/pgbouncer.log)"; exit 1; }
fi

node_up() { redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }
cluster_ok() { redis-cli -h 127.0.0.1 -p 7000 cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }
start_node() {
  mkdir -p "$CLUSTER_DIR/$1"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$1" --dir "$CLUSTER_DIR/$1" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --save "" --appendonly no --pidfile "$CLUSTER_DIR/$1/redis.pid" --logfile "$CLUSTER_DIR/$1/redis.log" >&2
}
wait_nodes() {
  for port in $CLUSTER_PORTS; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do node_up "$port" && break; sleep 0.5; done
    node_up "$port" || { say "Redis Cluster node $port does not start (see $CLUSTER_DIR/$port/redis.log)"; exit 1; }
  done
}
if ! cluster_ok; then
  say "starting a Redis Cluster on 127.0.0.1:7000-7005"
  for port in $CLUSTER_PORTS; do node_up "$port" || start_node "$port"; done
  wait_nodes
  # nodes that kept their nodes.conf find each other again; give them the node timeout
  for _ in 1 2 3 4 5 6; do cluster_ok && break; sleep 0.5; done
  if ! cluster_ok; then
    # never formed, or left in a state of its own: start over from empty nodes
    for port in $CLUSTER_PORTS; do
      redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
    done
    sleep 0.5
    rm -rf "$CLUSTER_DIR"
    for port in $CLUSTER_PORTS; do start_node "$port"; done
    wait_nodes
    hosts=""
    for port in $CLUSTER_PORTS; do hosts="$hosts 127.0.0.1:$port"; done
    # shellcheck disable=SC2086
    redis-cli --cluster create $hosts --cluster-replicas 1 --cluster-yes >/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do cluster_ok && break; sleep 0.5; done
  fi
  cluster_ok || { say "the Redis Cluster on 127.0.0.1:7000-7005 is not ok"; exit 1; }
fi
say "PgBouncer (127.0.0.1:$PGB_PORT) and the Redis Cluster (127.0.0.1:7000-7005) are up"
