#!/usr/bin/env bash
# The cost of the production topology, measured at one fixed open-loop rate
# that both topologies sustain (BENCH_FIXED_RATE orders a second for
# BENCH_FIXED_DURATION; vegeta's constant pacer), after BENCH_FIXED_IDLE of
# idle CPU sampled with the daemons up: one node (one Redis, one broker),
# then the production topology (the Redis Cluster 3+3, three brokers with
# replication factor 3 and min.insync.replicas 2), each with one api, one
# order-writer and the cache-invalidator, and no balancer; then production
# again behind HAProxy in HTTP mode and in TCP mode (PROXY v2), the
# balancer's lever. Prints CPU-ms per 1,000 orders per kind of process, raw and
# net of idle, the idle CPU per second, p50/p99 and the accept → MySQL lag,
# and the production topology's ratio to one node. make bench runs it last;
# alone: deploy/local/bench-fixed-rate.sh with make bench's environment;
# BENCH_FIXED_TOPOLOGIES names the runs (one-node, production,
# production+haproxy-http, production+haproxy-tcp; all by default), e.g.
# "production" alone for a lever's before and after. With
# BENCH_FIXED_CLIENTS set, the runs are closed-loop instead: BENCH_FIXED_ORDERS
# orders by that many clients as fast as they are answered (the rate and
# latency a topology allows a crowd of that size).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/local/ports
. deploy/local/ports
# seeds FIRST STEP: three addresses on loopback from port FIRST, STEP apart.
seeds() { echo "127.0.0.1:$1,127.0.0.1:$(($1 + $2)),127.0.0.1:$(($1 + 2 * $2))"; }

rate=${BENCH_FIXED_RATE:-800}
clients=${BENCH_FIXED_CLIENTS:-}
orders=${BENCH_FIXED_ORDERS:-40000}
duration=${BENCH_FIXED_DURATION:-60s}
idle=${BENCH_FIXED_IDLE:-20s}
api_addr=${BENCH_API_ADDR:-127.0.0.1:18081}
lb_addr=${BENCH_LB_ADDR:-127.0.0.1:18090}
api_admin=${BENCH_API_ADMIN:-127.0.0.1:19100}
writer_admin=${BENCH_WRITER_ADMIN:-127.0.0.1:19101}
invalidator_admin=${BENCH_INVALIDATOR_ADMIN:-127.0.0.1:19102}
cluster_seeds=${BENCH_REDIS_CLUSTER:-$(seeds "${SECKILL_REDIS_CLUSTER_PORT:-$REDIS_CLUSTER_PORT_DEFAULT}" 1)}
kafka_cluster=${BENCH_KAFKA_CLUSTER:-$(seeds "${SECKILL_KAFKA_CLUSTER_PORT:-$KAFKA_CLUSTER_PORT_DEFAULT}" 100)}
stack=${SECKILL_STACK_DIR:-.stack}
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-bench-admin-token-0123456789}

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
trap cleanup EXIT

ready() {
  local url
  for url in "$@"; do
    for _ in $(seq 1 60); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.5; done
    curl -fsS "$url" >/dev/null || { echo "bench: $url is not ready" >&2; exit 1; }
  done
}

runs=$(mktemp)
# topology LABEL ENV...: the three daemons with ENV, the fixed-rate run
# measuring them and the servers of the topology, then the daemons stopped.
# With balancer set (http or tcp), the sale goes through HAProxy in that
# mode (deploy/local/haproxy.sh), which is measured too.
balancer=""
topology() {
  local label=$1 procs servers=$2 front="http://$api_addr" trusted=""
  shift 2
  [ -z "$balancer" ] || trusted=$(deploy/local/haproxy.sh source)
  env "$@" SECKILL_API_ADDR="$api_addr" SECKILL_ADMIN_ADDR="$api_admin" SECKILL_LOG_LEVEL=warn \
    SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=1000000/1s SECKILL_API_TRUSTED_PROXIES="$trusted" bin/api &
  pids+=($!) procs="api=$!"
  if [ -n "$balancer" ]; then
    local cmd=config
    [ "$balancer" = http ] || cmd=config-$balancer
    deploy/local/haproxy.sh "$cmd" "$lb_addr" "$api_addr" > "$stack/bench-fixed-haproxy.cfg"
    haproxy -db -f "$stack/bench-fixed-haproxy.cfg" &
    pids+=($!) procs+=",haproxy=$!" front="http://$lb_addr"
  fi
  env "$@" SECKILL_ADMIN_ADDR="$writer_admin" SECKILL_LOG_LEVEL=warn bin/order-writer &
  pids+=($!) procs+=",order-writer=$!"
  env "$@" SECKILL_ADMIN_ADDR="$invalidator_admin" SECKILL_LOG_LEVEL=warn bin/cache-invalidator &
  pids+=($!) procs+=",cache-invalidator=$!,mariadb=$(cat "$stack/mariadb/mariadb.pid"),$servers"
  ready "$front/readyz" "http://$writer_admin/readyz" "http://$invalidator_admin/readyz"
  # A warm-up, not recorded: brokers fresh from a restart spend their first
  # minute compiling (docs/performance.md), and the idle sample that
  # follows must not include it. Up to a tenth of it may be refused (503).
  echo
  echo "== fixed rate: $label, warm-up (not recorded) =="
  env "$@" bin/loadgen multinode -api "$front" -label "$label warm-up" -users "${BENCH_FIXED_WARMUP:-10000}" -workers 64 \
    -procs "$procs" -writer-metrics "http://$writer_admin/metrics"
  echo
  if [ -n "$clients" ]; then
    echo "== closed loop, $clients clients: $label =="
    load=(-rate 0 -users "$orders" -workers "$clients")
  else
    echo "== fixed rate: $label =="
    load=(-rate "$rate" -duration "$duration" -workers 2000)
  fi
  env "$@" bin/loadgen fixedrate -api "$front" -label "$label" "${load[@]}" -idle "$idle" \
    -procs "$procs" -writer-metrics "http://$writer_admin/metrics" -runs "$runs"
  cleanup
}

topologies=${BENCH_FIXED_TOPOLOGIES:-one-node production production+haproxy-http production+haproxy-tcp}
wanted() { [[ " $topologies " == *" $1 "* ]]; }

single="redis=$(cat "$stack/redis/redis.pid"),kafka=$(cat "$stack/kafka/kafka.pid")"
! wanted one-node || topology "one node" "$single" -u SECKILL_REDIS_CLUSTER SECKILL_REDIS_ADDR="${BENCH_REDIS_ADDR:-127.0.0.1:${SECKILL_REDIS_PORT:-$REDIS_PORT_DEFAULT}}" \
  SECKILL_KAFKA_BROKERS="${BENCH_KAFKA_BROKERS:-127.0.0.1:${SECKILL_KAFKA_PORT:-$KAFKA_PORT_DEFAULT}}"

production=""
for pidfile in "$stack"/redis-cluster/*/redis.pid; do
  production+="redis-$(basename "$(dirname "$pidfile")")=$(cat "$pidfile"),"
done
for n in 1 2 3; do production+="kafka-$n=$(cat "$stack/kafka-cluster/$n/kafka.pid"),"; done
on_production=(-u SECKILL_REDIS_ADDR SECKILL_REDIS_CLUSTER="$cluster_seeds" SECKILL_KAFKA_BROKERS="$kafka_cluster")
! wanted production || topology "production" "${production%,}" "${on_production[@]}"
# The balancer's lever: HAProxy in HTTP mode (X-Forwarded-For)
# and in TCP mode (PROXY v2) in front of the same api.
for balancer in http tcp; do
  ! wanted "production+haproxy-$balancer" || topology "production, HAProxy $balancer" "${production%,}" "${on_production[@]}"
done
balancer=""
# Closed loop, the floor beside the api on one node: the accept path's I/O
# alone (bench/cmd/floor: echo, one EVALSHA, one produce with acks=all),
# the same clients, on the one-node servers.
if [ -n "$clients" ] && wanted one-node; then
  floor_addr=${BENCH_FLOOR_ADDR:-127.0.0.1:18089}
  one_node=(-u SECKILL_REDIS_CLUSTER SECKILL_REDIS_ADDR="${BENCH_REDIS_ADDR:-127.0.0.1:${SECKILL_REDIS_PORT:-$REDIS_PORT_DEFAULT}}"
    SECKILL_KAFKA_BROKERS="${BENCH_KAFKA_BROKERS:-127.0.0.1:${SECKILL_KAFKA_PORT:-$KAFKA_PORT_DEFAULT}}")
  env "${one_node[@]}" bin/floor -addr "$floor_addr" &
  pids+=($!)
  for _ in $(seq 1 60); do curl -s -o /dev/null "http://$floor_addr/" 2>/dev/null && break; sleep 0.5; done
  echo
  echo "== closed loop, $clients clients: the floor =="
  env "${one_node[@]}" bin/loadgen floor -api "http://$floor_addr" -users "$orders" -workers "$clients" -runs "$runs" -label "one node"
  cleanup
fi
rm -f "$runs"
