#!/usr/bin/env bash
# A hot voucher's ceiling on the production topology: one api and one
# order-writer on the Redis Cluster 3+3 and three brokers (RF 3,
# min.insync.replicas 2), one sale in 3 stock buckets (one per master),
# an open-loop crowd at rising rates (BENCH_CEILING_RATES, each held
# BENCH_CEILING_HOLD, up to BENCH_CEILING_CONNS connections): the highest
# rate held with 99 % of the orders accepted, p99 ≤ 100 ms and the audit exact.
# make bench runs it; alone: with make bench's environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/local/ports
. deploy/local/ports
seeds() { echo "127.0.0.1:$1,127.0.0.1:$(($1 + $2)),127.0.0.1:$(($1 + 2 * $2))"; }

api_addr=${BENCH_API_ADDR:-127.0.0.1:18081}
api_admin=${BENCH_API_ADMIN:-127.0.0.1:19100}
writer_admin=${BENCH_WRITER_ADMIN:-127.0.0.1:19101}
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-bench-admin-token-0123456789}
production=(-u SECKILL_REDIS_ADDR SECKILL_REDIS_CLUSTER="${BENCH_REDIS_CLUSTER:-$(seeds "${SECKILL_REDIS_CLUSTER_PORT:-$REDIS_CLUSTER_PORT_DEFAULT}" 1)}"
  SECKILL_KAFKA_BROKERS="${BENCH_KAFKA_CLUSTER:-$(seeds "${SECKILL_KAFKA_CLUSTER_PORT:-$KAFKA_CLUSTER_PORT_DEFAULT}" 100)}")

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

env "${production[@]}" SECKILL_API_ADDR="$api_addr" SECKILL_ADMIN_ADDR="$api_admin" SECKILL_LOG_LEVEL=warn \
  SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=1000000/1s bin/api &
pids+=($!)
env "${production[@]}" SECKILL_ADMIN_ADDR="$writer_admin" SECKILL_LOG_LEVEL=warn bin/order-writer &
pids+=($!)
for url in "http://$api_addr/readyz" "http://$writer_admin/readyz"; do
  for _ in $(seq 1 60); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS "$url" >/dev/null || { echo "bench: $url is not ready" >&2; exit 1; }
done
echo
echo "== a hot voucher's ceiling, production topology =="
env "${production[@]}" bin/loadgen ceiling -api "http://$api_addr" -writer-metrics "http://$writer_admin/metrics" \
  -rates "${BENCH_CEILING_RATES:-200,400,600,800,1000,1500,2000}" -hold "${BENCH_CEILING_HOLD:-10s}" -buckets "${BENCH_CEILING_BUCKETS:-3}" \
  -workers "${BENCH_CEILING_CONNS:-1500}"
