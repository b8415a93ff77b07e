#!/usr/bin/env bash
# The make bench load runs, against real api and order-writer processes on
# the local stack. Prints figures and ratios; asserts no timing (the
# machines are shared and noisy), only the audits' invariants.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/local/ports
. deploy/local/ports
# seeds FIRST STEP: three addresses on loopback from port FIRST, STEP apart.
seeds() { echo "127.0.0.1:$1,127.0.0.1:$(($1 + $2)),127.0.0.1:$(($1 + 2 * $2))"; }

api_addr=${BENCH_API_ADDR:-127.0.0.1:18081}
writer_admin=${BENCH_WRITER_ADMIN:-127.0.0.1:19101}
users=${BENCH_USERS:-20000}
workers=${BENCH_WORKERS:-64}
plots=${BENCH_PLOTS:-.stack/bench}
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-bench-admin-token-0123456789}

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# Both seckill limiters stay on, so that their cost is in the figures; the
# per-address one is raised, since every request comes from this one
# load generator.
SECKILL_API_ADDR=$api_addr SECKILL_ADMIN_ADDR=${BENCH_API_ADMIN:-127.0.0.1:19100} SECKILL_LOG_LEVEL=warn SECKILL_API_BENCH_NOOP=true \
  SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=1000000/1s bin/api &
api_pid=$!
pids+=($api_pid)
# The writer's log is kept: its reader's reconnects are counted at the end.
writer_log=$(mktemp)
SECKILL_ADMIN_ADDR=$writer_admin SECKILL_LOG_LEVEL=warn bin/order-writer 2> >(tee "$writer_log" >&2) &
writer_pid=$!
pids+=($writer_pid)
invalidator_admin=${BENCH_INVALIDATOR_ADMIN:-127.0.0.1:19102}
SECKILL_ADMIN_ADDR=$invalidator_admin SECKILL_LOG_LEVEL=warn bin/cache-invalidator &
invalidator_pid=$!
pids+=($invalidator_pid)
stack=${SECKILL_STACK_DIR:-.stack}
procs="api=$api_pid,order-writer=$writer_pid,cache-invalidator=$invalidator_pid"
procs+=",redis=$(cat "$stack/redis/redis.pid"),mariadb=$(cat "$stack/mariadb/mariadb.pid"),kafka=$(cat "$stack/kafka/kafka.pid")"
for url in "http://$api_addr/readyz" "http://$writer_admin/readyz" "http://$invalidator_admin/readyz"; do
  for _ in $(seq 1 60); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS "$url" >/dev/null || { echo "bench: $url is not ready" >&2; exit 1; }
done

echo "bench: $(nproc) cores; api, order-writer, Redis, MariaDB, Kafka and the load generator all on this machine"
echo
echo "== POST /user/login =="
bin/loadgen login -api "http://$api_addr" -users 5000 -workers 32
echo
echo "== flash sale =="
bin/loadgen bench -api "http://$api_addr" -users "$users" -workers "$workers" -procs "$procs" \
  -writer-metrics "http://$writer_admin/metrics" -writer-bin bin/order-writer -plot "$plots"
echo "bench: latency plots in $plots/*.html"

# One node against the Redis Cluster: the one-node figures first, with the
# programs above; then api and writer again on the cluster (stack.sh up
# --redis-cluster, which make bench starts), the same runs with every
# cluster node's CPU in the tables, and the comparison: a hot voucher, the
# users spread over twelve vouchers, the gate's ceiling on one master.
cluster_seeds=${BENCH_REDIS_CLUSTER:-$(seeds "${SECKILL_REDIS_CLUSTER_PORT:-$REDIS_CLUSTER_PORT_DEFAULT}" 1)}
spread_users=${BENCH_SPREAD_USERS:-20000}
figures=$(mktemp)
echo
echo "== Redis: one node (the cluster's turn follows) =="
bin/loadgen spread -api "http://$api_addr" -label "one node" -users "$spread_users" -workers "$workers" -procs "$procs" \
  -writer-metrics "http://$writer_admin/metrics" -save "$figures"

# The accept path in each session mode, on one node: the api restarted
# with redis sessions (the default, with its session cache), then with jwt
# access tokens signed HS256, then EdDSA; the same order-writer, the same
# processes measured.
kill -TERM "$api_pid"
wait "$api_pid" 2>/dev/null || true
# start_api VAR=value...: the api on $api_addr with the bench's limits and
# these variables, its pid in api_pid, once it is ready.
start_api() {
  env "$@" SECKILL_API_ADDR=$api_addr SECKILL_ADMIN_ADDR=${BENCH_API_ADMIN:-127.0.0.1:19100} SECKILL_LOG_LEVEL=warn \
    SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=1000000/1s bin/api &
  api_pid=$!
  pids+=($api_pid)
  for _ in $(seq 1 60); do curl -fsS "http://$api_addr/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS "http://$api_addr/readyz" >/dev/null || { echo "bench: the api ($*) is not ready" >&2; exit 1; }
}
session_runs=$(mktemp)
hs_key=$(bin/seckillctl jwt-key bench-hs HS256)
ed_key=$(bin/seckillctl jwt-key bench-ed EdDSA)
for mode in redis "jwt HS256" "jwt EdDSA"; do
  case $mode in
    redis) mode_env=(SECKILL_SESSION_MODE=redis) ;;
    "jwt HS256") mode_env=(SECKILL_SESSION_MODE=jwt SECKILL_JWT_KEYS="{\"sign\":\"bench-hs\",\"keys\":[$hs_key]}") ;;
    "jwt EdDSA") mode_env=(SECKILL_SESSION_MODE=jwt SECKILL_JWT_KEYS="{\"sign\":\"bench-ed\",\"keys\":[$ed_key]}") ;;
  esac
  start_api "${mode_env[@]}"
  echo
  echo "== sessions: $mode =="
  env "${mode_env[@]}" bin/loadgen sessions -api "http://$api_addr" -label "$mode" -users "$spread_users" -workers "$workers" \
    -procs "api=$api_pid,order-writer=$writer_pid,redis=$(cat "$stack/redis/redis.pid"),mariadb=$(cat "$stack/mariadb/mariadb.pid"),kafka=$(cat "$stack/kafka/kafka.pid")" \
    -writer-metrics "http://$writer_admin/metrics" -runs "$session_runs"
  kill -TERM "$api_pid"
  wait "$api_pid" 2>/dev/null || true
done
rm -f "$session_runs"

# The bot checks that need no person: the accept path on a sale with
# botCheck none and on one with path (each buyer GETs its order path,
# then orders at it), the same client loop, redis sessions, in one run.
start_api SECKILL_SESSION_MODE=redis
echo
echo "== bot check: none against path =="
bin/loadgen botcheck -api "http://$api_addr" -users "$spread_users" -workers "$workers" \
  -procs "api=$api_pid,order-writer=$writer_pid,redis=$(cat "$stack/redis/redis.pid"),mariadb=$(cat "$stack/mariadb/mariadb.pid"),kafka=$(cat "$stack/kafka/kafka.pid")" \
  -writer-metrics "http://$writer_admin/metrics"

# A sale's admission: first-come against a draw (every buyer enters in the
# window, then the order-writer's drawer serves them all), the same buyers
# and units, CPU per process per phase.
echo
echo "== admission: first-come against a draw =="
bin/loadgen draw -api "http://$api_addr" -users "$spread_users" -workers "$workers" \
  -procs "api=$api_pid,order-writer=$writer_pid,redis=$(cat "$stack/redis/redis.pid"),mariadb=$(cat "$stack/mariadb/mariadb.pid"),kafka=$(cat "$stack/kafka/kafka.pid")"
kill -TERM "$api_pid"
wait "$api_pid" 2>/dev/null || true

# The accept path traced: the api restarted with tracing off, then
# exporting over OTLP/HTTP to a sink that counts the spans and keeps none
# (the exporter's whole cost stays in the api), sampling 1 % of the orders,
# then all of them; redis sessions, the same order-writer, untraced.
sink=${BENCH_OTLP_SINK:-127.0.0.1:14318}
bin/loadgen otlp-sink -addr "$sink" &
pids+=($!)
tracing_runs=$(mktemp)
for sampling in off "1 %" "100 %"; do
  case $sampling in
    off) trace_env=() ;;
    "1 %") trace_env=(OTEL_TRACES_EXPORTER=otlp OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.01 OTEL_BSP_MAX_QUEUE_SIZE=32768) ;;
    "100 %") trace_env=(OTEL_TRACES_EXPORTER=otlp OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=1 OTEL_BSP_MAX_QUEUE_SIZE=32768) ;;
  esac
  start_api "${trace_env[@]}" OTEL_EXPORTER_OTLP_ENDPOINT="http://$sink" OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
  echo
  echo "== tracing: $sampling =="
  bin/loadgen tracing -api "http://$api_addr" -label "$sampling" -users "$spread_users" -workers "$workers" -sink "http://$sink" \
    -procs "api=$api_pid,order-writer=$writer_pid,redis=$(cat "$stack/redis/redis.pid"),mariadb=$(cat "$stack/mariadb/mariadb.pid"),kafka=$(cat "$stack/kafka/kafka.pid")" \
    -writer-metrics "http://$writer_admin/metrics" -runs "$tracing_runs"
  kill -TERM "$api_pid"
  wait "$api_pid" 2>/dev/null || true
done
rm -f "$tracing_runs"
cleanup
pids=()
cluster_env=(env -u SECKILL_REDIS_ADDR SECKILL_REDIS_CLUSTER="$cluster_seeds")
"${cluster_env[@]}" SECKILL_API_ADDR=$api_addr SECKILL_ADMIN_ADDR=${BENCH_API_ADMIN:-127.0.0.1:19100} SECKILL_LOG_LEVEL=warn \
  SECKILL_API_BENCH_NOOP=true SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=1000000/1s bin/api &
api_pid=$!
pids+=($api_pid)
"${cluster_env[@]}" SECKILL_ADMIN_ADDR=$writer_admin SECKILL_LOG_LEVEL=warn bin/order-writer 2> >(tee -a "$writer_log" >&2) &
writer_pid=$!
pids+=($writer_pid)
procs="api=$api_pid,order-writer=$writer_pid,mariadb=$(cat "$stack/mariadb/mariadb.pid"),kafka=$(cat "$stack/kafka/kafka.pid")"
for pidfile in "$stack"/redis-cluster/*/redis.pid; do
  port=$(basename "$(dirname "$pidfile")")
  procs+=",redis-$port=$(cat "$pidfile")"
done
for url in "http://$api_addr/readyz" "http://$writer_admin/readyz"; do
  for _ in $(seq 1 60); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS "$url" >/dev/null || { echo "bench: $url is not ready (on the cluster)" >&2; exit 1; }
done
echo
echo "== flash sale, on the Redis Cluster =="
"${cluster_env[@]}" bin/loadgen bench -api "http://$api_addr" -users "$users" -workers "$workers" -procs "$procs" \
  -writer-metrics "http://$writer_admin/metrics" -writer-bin bin/order-writer -plot "$plots/cluster"
echo
echo "== Redis: one node against the cluster =="
"${cluster_env[@]}" bin/loadgen spread -api "http://$api_addr" -label "cluster" -users "$spread_users" -workers "$workers" -procs "$procs" \
  -writer-metrics "http://$writer_admin/metrics" -beside "$figures"
# One hot voucher sold from 1 and from 3 stock buckets (one per master):
# the gate's ceiling by redis-benchmark on the buckets' masters, then the
# sale through the api, the bucket counts alternated twice.
echo
echo "== one hot voucher in stock buckets, on the Redis Cluster =="
"${cluster_env[@]}" bin/loadgen buckets -api "http://$api_addr" -users "$spread_users" -workers "$workers" -procs "$procs" \
  -writer-metrics "http://$writer_admin/metrics"
cleanup
pids=()

# The multi-node topology, as production runs it: the Redis Cluster, three
# Kafka brokers (stack.sh up --kafka-brokers 3, which make bench starts),
# three api instances, two order-writers and the cache-invalidator; the
# same spread load through HAProxy in front of 1, 2, then 3 of the api
# instances, every process's CPU in the table, beside the one-node run.
kafka_cluster=${BENCH_KAFKA_CLUSTER:-$(seeds "${SECKILL_KAFKA_CLUSTER_PORT:-$KAFKA_CLUSTER_PORT_DEFAULT}" 100)}
multi_env=("${cluster_env[@]}" SECKILL_KAFKA_BROKERS="$kafka_cluster")
api_addrs=() procs=""
for i in 1 2 3; do
  a=127.0.0.1:$((18180 + i))
  "${multi_env[@]}" SECKILL_API_ADDR=$a SECKILL_ADMIN_ADDR=127.0.0.1:$((19110 + i)) SECKILL_LOG_LEVEL=warn \
    SECKILL_API_BENCH_NOOP=true SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=1000000/1s bin/api &
  pids+=($!) api_addrs+=("$a") procs+="api-$i=$!,"
done
writer_admins=()
for i in 1 2; do
  "${multi_env[@]}" SECKILL_ADMIN_ADDR=127.0.0.1:$((19130 + i)) SECKILL_LOG_LEVEL=warn bin/order-writer 2> >(tee -a "$writer_log" >&2) &
  pids+=($!) writer_admins+=("127.0.0.1:$((19130 + i))") procs+="order-writer-$i=$!,"
done
"${multi_env[@]}" SECKILL_ADMIN_ADDR=$invalidator_admin SECKILL_LOG_LEVEL=warn bin/cache-invalidator &
pids+=($!) procs+="cache-invalidator=$!,mariadb=$(cat "$stack/mariadb/mariadb.pid")"
for n in 1 2 3; do procs+=",kafka-$n=$(cat "$stack/kafka-cluster/$n/kafka.pid")"; done
for pidfile in "$stack"/redis-cluster/*/redis.pid; do
  procs+=",redis-$(basename "$(dirname "$pidfile")")=$(cat "$pidfile")"
done
for a in "${api_addrs[@]}" "${writer_admins[@]}" "$invalidator_admin"; do
  for _ in $(seq 1 60); do curl -fsS "http://$a/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS "http://$a/readyz" >/dev/null || { echo "bench: http://$a is not ready (multi-node)" >&2; exit 1; }
done
runs=$(mktemp)
lb=${BENCH_LB_ADDR:-127.0.0.1:18080}
# n=0: a warm-up through all three, not recorded: the cluster's brokers may
# have restarted since their last load (the failure tests restart them),
# and their JIT costs CPU at first, enough on two shared cores for some
# publishes to time out: the warm-up counts its refusals (503s, a tenth of
# the run at most) and audits with them; the recorded runs want every
# request accepted.
for n in 0 1 2 3; do
  deploy/local/haproxy.sh config "$lb" "${api_addrs[@]:0:$((n == 0 ? 3 : n))}" > "$stack/bench-haproxy.cfg"
  haproxy -db -f "$stack/bench-haproxy.cfg" &
  lb_pid=$!
  # Among the pids, so that a run that fails stops it too: the exit's
  # cleanup waits for every child.
  pids+=($lb_pid)
  for _ in $(seq 1 40); do curl -fsS "http://$lb/readyz" >/dev/null 2>&1 && break; sleep 0.25; done
  echo
  if [ "$n" = 0 ]; then
    echo "== multi-node: warm-up, not recorded =="
    record=()
  else
    echo "== multi-node: $n api instance(s) behind HAProxy =="
    record=(-runs "$runs" -single "$figures")
  fi
  "${multi_env[@]}" bin/loadgen multinode -api "http://$lb" -label "$n api, 3 brokers, cluster" -users "$spread_users" -workers "$workers" \
    -procs "$procs,haproxy=$lb_pid" -writer-metrics "http://${writer_admins[0]}/metrics" "${record[@]}"
  kill -TERM "$lb_pid"
  wait "$lb_pid" 2>/dev/null || true
done
rm -f "$figures" "$runs"
cleanup
pids=()
echo
echo "order-writer: Kafka fetches that timed out and reconnected over the whole bench: $(grep -c 'kafka reader: .*i/o timeout' "$writer_log" || true)"
rm -f "$writer_log"

# One MariaDB against the MariaDB Galera cluster: the accept path's CPU
# per order and its lag, and the order-writer's drain, on each.
deploy/local/bench-mysql-cluster.sh

# Last, the figure the cost of scaling out is judged by: the same fixed
# open-loop rate on one node and on the production topology, CPU per order
# net of idle (docs/performance.md).
deploy/local/bench-fixed-rate.sh

# The same topologies closed-loop, 64 clients as fast as they are answered
# (the rate and latency a crowd of that size gets), and the floor beside
# the api on one node: the accept path's I/O alone (bench/cmd/floor).
BENCH_FIXED_CLIENTS=${BENCH_CLOSED_CLIENTS:-64} BENCH_FIXED_TOPOLOGIES="one-node production" deploy/local/bench-fixed-rate.sh

# A hot voucher's ceiling on the production topology (open loop, rising).
deploy/local/bench-ceiling.sh
