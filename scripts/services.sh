#!/usr/bin/env bash
# Real Redis and PostgreSQL servers for the test suites, on loopback only: one Redis server, a
# Redis Cluster (three primaries with a replica each) and one PostgreSQL server.
#
#   scripts/services.sh start   install (Debian packages) when missing, start all, print exports
#   scripts/services.sh env     print the exports for servers already started
#   scripts/services.sh stop    stop the servers this script started, by the PIDs in their pidfiles
#
# State lives in $AGENTS_RECONCILE_SERVICES_DIR (default /tmp/agents-reconcile-services), which the
# postgres user must be able to reach. Ports: $REDIS_PORT (6390), $POSTGRES_PORT (5440) and the
# cluster's six from $REDIS_CLUSTER_PORT (7101..7106).
set -euo pipefail

state=${AGENTS_RECONCILE_SERVICES_DIR:-/tmp/agents-reconcile-services}
redis_port=${REDIS_PORT:-6390}
postgres_port=${POSTGRES_PORT:-5440}
cluster_port=${REDIS_CLUSTER_PORT:-7101}
cluster_nodes=6
database=agents_reconcile

pg_bin() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$found" ] || return 1
  echo "$found"
}

install() {
  if command -v redis-server >/dev/null && pg_bin >/dev/null; then
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "redis-server or postgresql is missing and installing them needs root" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    redis-server postgresql >/dev/null
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start_redis() {
  mkdir -p "$state/redis"
  if [ -f "$state/redis/redis.pid" ] && kill -0 "$(cat "$state/redis/redis.pid")" 2>/dev/null; then
    return
  fi
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --dir "$state/redis" --daemonize yes --pidfile "$state/redis/redis.pid" \
    --logfile "$state/redis/redis.log"
  for _ in $(seq 50); do
    redis-cli -h 127.0.0.1 -p "$redis_port" ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "redis did not answer on 127.0.0.1:$redis_port" >&2
  exit 1
}

cluster_ports() {
  seq "$cluster_port" $((cluster_port + cluster_nodes - 1))
}

# Six nodes on loopback, each with its own directory, then one cluster of them: three primaries,
# a replica each. A node timeout of 2 s lets a replica take over quickly when its primary dies.
start_cluster() {
  local port seeds=()
  for port in $(cluster_ports); do
    mkdir -p "$state/cluster/$port"
    seeds+=("127.0.0.1:$port")
    if [ -f "$state/cluster/$port/redis.pid" ] &&
      kill -0 "$(cat "$state/cluster/$port/redis.pid")" 2>/dev/null; then
      continue
    fi
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --dir "$state/cluster/$port" --daemonize yes --pidfile "$state/cluster/$port/redis.pid" \
      --logfile "$state/cluster/$port/redis.log"
  done
  for port in $(cluster_ports); do
    for _ in $(seq 50); do
      redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
  if ! redis-cli -h 127.0.0.1 -p "$cluster_port" cluster info | grep -q 'cluster_state:ok'; then
    if [ "$(redis-cli -h 127.0.0.1 -p "$cluster_port" cluster info |
      sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p')" = 1 ]; then
      redis-cli --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
    fi
  fi
  for _ in $(seq 100); do
    redis-cli -h 127.0.0.1 -p "$cluster_port" cluster info | grep -q 'cluster_state:ok' && return
    sleep 0.1
  done
  echo "the redis cluster on 127.0.0.1:$cluster_port.. did not come up" >&2
  exit 1
}

start_postgres() {
  local bin data
  bin=$(pg_bin)
  data="$state/postgres/data"
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir "$state/postgres" --shell /usr/sbin/nologin postgres
  fi
  mkdir -p "$state/postgres/socket"
  chmod 755 "$state"
  [ "$(id -u)" = 0 ] && chown -R postgres "$state/postgres"
  if [ -f "$data/postmaster.pid" ] && kill -0 "$(head -1 "$data/postmaster.pid")" 2>/dev/null; then
    return
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    as_postgres "$bin/initdb" -D "$data" --auth=trust --no-sync -U postgres >/dev/null
  fi
  # A postmaster that just died may keep its pidfile locked for a moment: try a few times.
  for attempt in 1 2 3 4 5; do
    if as_postgres "$bin/pg_ctl" -D "$data" -l "$state/postgres/server.log" -w -t 30 start \
      -o "-c listen_addresses=127.0.0.1 -p $postgres_port -k $state/postgres/socket -c fsync=off" \
      >/dev/null; then
      break
    fi
    [ "$attempt" = 5 ] && { tail -20 "$state/postgres/server.log" >&2; exit 1; }
    sleep 1
  done
  as_postgres "$bin/psql" -h 127.0.0.1 -p "$postgres_port" -U postgres -qtAc \
    "SELECT 1 FROM pg_database WHERE datname = '$database'" | grep -q 1 ||
    as_postgres "$bin/psql" -h 127.0.0.1 -p "$postgres_port" -U postgres -qc \
      "CREATE DATABASE $database" >/dev/null
}

print_env() {
  local port seeds=""
  for port in $(cluster_ports | head -3); do seeds="$seeds,127.0.0.1:$port"; done
  echo "export AGENTS_RECONCILE_TEST_REDIS_URL=redis://127.0.0.1:$redis_port/0"
  echo "export AGENTS_RECONCILE_TEST_REDIS_CLUSTER_URL=redis+cluster://${seeds#,}"
  echo "export AGENTS_RECONCILE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:$postgres_port/$database"
  # For the test that crashes the PostgreSQL server between a write and its reply.
  echo "export AGENTS_RECONCILE_TEST_POSTGRES_DATA=$state/postgres/data"
}

stop_redis() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$pidfile"
}

stop_all() {
  local pid port
  stop_redis "$state/redis/redis.pid"
  for port in $(cluster_ports); do
    stop_redis "$state/cluster/$port/redis.pid"
  done
  # A cluster's nodes remember each other in nodes.conf: a stopped cluster starts anew.
  rm -rf "$state/cluster"
  if [ -f "$state/postgres/data/postmaster.pid" ]; then
    pid=$(head -1 "$state/postgres/data/postmaster.pid")
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
}

case "${1:-}" in
  start) install; start_redis; start_cluster; start_postgres; print_env ;;
  env) print_env ;;
  stop) stop_all ;;
  *) echo "usage: $0 start|env|stop" >&2; exit 2 ;;
esac
