#!/usr/bin/env bash
# make bench: one MariaDB against the MariaDB Galera cluster (stack.sh up
# --mysql-cluster, which make bench starts), the rest as production runs it
# (the Redis Cluster, three brokers). The same accept-path run with the
# api, the order-writer and the cache-invalidator on each (every
# process's CPU per 1,000 orders, the accept→MySQL lag printed by the
# run), then the order-writer's drain into each. Asserts no timing, only
# the audits.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/local/ports
. deploy/local/ports
# seeds FIRST STEP: three addresses on loopback from port FIRST, STEP apart.
seeds() { echo "127.0.0.1:$1,127.0.0.1:$(($1 + $2)),127.0.0.1:$(($1 + 2 * $2))"; }

api_addr=${BENCH_API_ADDR:-127.0.0.1:18081}
api_admin=${BENCH_API_ADMIN:-127.0.0.1:19100}
writer_admin=${BENCH_WRITER_ADMIN:-127.0.0.1:19101}
invalidator_admin=${BENCH_INVALIDATOR_ADMIN:-127.0.0.1:19102}
users=${BENCH_SPREAD_USERS:-20000}
workers=${BENCH_WORKERS:-64}
stack=${SECKILL_STACK_DIR:-.stack}
# The stack's own servers, whatever SECKILL_MYSQL_DSN the caller runs on.
single="seckill:seckill@tcp(127.0.0.1:${SECKILL_MYSQL_PORT:-$MYSQL_PORT_DEFAULT})/seckill"
cluster_addr=127.0.0.1:${SECKILL_MYSQL_CLUSTER_PORT:-$MYSQL_CLUSTER_PORT_DEFAULT}
cluster="seckill:seckill@tcp($cluster_addr)/seckill"
redis_cluster=${BENCH_REDIS_CLUSTER:-$(seeds "${SECKILL_REDIS_CLUSTER_PORT:-$REDIS_CLUSTER_PORT_DEFAULT}" 1)}
kafka_cluster=${BENCH_KAFKA_CLUSTER:-$(seeds "${SECKILL_KAFKA_CLUSTER_PORT:-$KAFKA_CLUSTER_PORT_DEFAULT}" 100)}
on_cluster=(env -u SECKILL_REDIS_ADDR SECKILL_REDIS_CLUSTER="$redis_cluster" SECKILL_KAFKA_BROKERS="$kafka_cluster")
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-bench-admin-token-0123456789}

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
trap cleanup EXIT

# up DSN BINLOG_ADDR: the three programs on that MySQL; their pids in
# api_pid, writer_pid, invalidator_pid once all are ready.
up() {
  local dsn=$1 binlog=$2 url
  "${on_cluster[@]}" SECKILL_MYSQL_DSN="$dsn" SECKILL_BINLOG_ADDR="$binlog" SECKILL_API_ADDR=$api_addr SECKILL_ADMIN_ADDR=$api_admin \
    SECKILL_LOG_LEVEL=warn SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=1000000/1s bin/api &
  api_pid=$!
  "${on_cluster[@]}" SECKILL_MYSQL_DSN="$dsn" SECKILL_BINLOG_ADDR="$binlog" SECKILL_ADMIN_ADDR=$writer_admin SECKILL_LOG_LEVEL=warn bin/order-writer &
  writer_pid=$!
  # A position file of its own: the two servers' binlogs are not one.
  "${on_cluster[@]}" SECKILL_MYSQL_DSN="$dsn" SECKILL_BINLOG_ADDR="$binlog" SECKILL_ADMIN_ADDR=$invalidator_admin SECKILL_LOG_LEVEL=warn \
    SECKILL_BINLOG_POSITION_FILE="$stack/bench-invalidator-$binlog.json" bin/cache-invalidator &
  invalidator_pid=$!
  pids+=("$api_pid" "$writer_pid" "$invalidator_pid")
  for url in "http://$api_addr/readyz" "http://$writer_admin/readyz" "http://$invalidator_admin/readyz"; do
    for _ in $(seq 1 60); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.5; done
    curl -fsS "$url" >/dev/null || { echo "bench: $url is not ready" >&2; exit 1; }
  done
}

# make bench migrates the single server's database; the cluster's too.
SECKILL_MYSQL_DSN="$cluster" bin/seckillctl migrate

runs=$(mktemp)
drains=()
for topology in "one MariaDB" "Galera, 3 nodes"; do
  procs=""
  for pidfile in "$stack"/redis-cluster/*/redis.pid; do procs+="redis-$(basename "$(dirname "$pidfile")")=$(cat "$pidfile"),"; done
  for n in 1 2 3; do procs+="kafka-$n=$(cat "$stack/kafka-cluster/$n/kafka.pid"),"; done
  procs=${procs%,}
  if [ "$topology" = "one MariaDB" ]; then
    dsn=$single binlog=${single#*@tcp(} binlog=${binlog%%)*}
    procs+=",mariadb=$(cat "$stack/mariadb/mariadb.pid")"
  else
    dsn=$cluster binlog=$cluster_addr
    for n in 1 2 3; do procs+=",mariadb-$n=$(cat "$stack/mariadb-cluster/$n/mariadb.pid")"; done
    procs+=",haproxy-mysql=$(cat "$stack/mariadb-cluster/haproxy.pid")"
  fi
  up "$dsn" "$binlog"
  echo
  echo "== MySQL: $topology =="
  "${on_cluster[@]}" SECKILL_MYSQL_DSN="$dsn" bin/loadgen sessions -varied MySQL -topology "the Redis Cluster, three brokers" -api "http://$api_addr" -label "$topology" -users "$users" -workers "$workers" \
    -procs "api=$api_pid,order-writer=$writer_pid,cache-invalidator=$invalidator_pid,$procs" \
    -writer-metrics "http://$writer_admin/metrics" -runs "$runs"
  cleanup
  echo
  echo "== MySQL: the order-writer's drain into $topology =="
  drain=$("${on_cluster[@]}" SECKILL_MYSQL_DSN="$dsn" bin/loadgen drain -writer-bin bin/order-writer)
  echo "$drain"
  drains+=("$topology: $(tail -n 1 <<<"$drain")")
done
rm -f "$runs"
echo
echo "the drain, one MariaDB against the Galera cluster:"
printf '  %s\n' "${drains[@]}"
