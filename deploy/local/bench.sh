#!/usr/bin/env bash
# The make bench load runs, against real api and order-writer processes on
# the local stack. Prints figures and ratios; asserts no timing (the
# machines are shared and noisy), only the audits' invariants.
set -euo pipefail
cd "$(dirname "$0")/../.."

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

SECKILL_API_ADDR=$api_addr SECKILL_ADMIN_ADDR=${BENCH_API_ADMIN:-127.0.0.1:19100} SECKILL_LOG_LEVEL=warn SECKILL_API_BENCH_NOOP=true \
  SECKILL_RATE_LOGIN_IP=off SECKILL_RATE_SECKILL_IP=off SECKILL_RATE_SECKILL_USER=off bin/api &
pids+=($!)
SECKILL_ADMIN_ADDR=$writer_admin SECKILL_LOG_LEVEL=warn bin/order-writer &
pids+=($!)
for url in "http://$api_addr/readyz" "http://$writer_admin/readyz"; do
  for _ in $(seq 1 60); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS "$url" >/dev/null || { echo "bench: $url is not ready" >&2; exit 1; }
done

echo "bench: $(nproc) cores; api, order-writer, Redis, MariaDB, Kafka and the load generator all on this machine"
echo
echo "== POST /user/login =="
bin/loadgen login -api "http://$api_addr" -users 5000 -workers 32
echo
echo "== flash sale =="
bin/loadgen bench -api "http://$api_addr" -users "$users" -workers "$workers" \
  -writer-metrics "http://$writer_admin/metrics" -writer-bin bin/order-writer -plot "$plots"
echo "bench: latency plots in $plots/*.html"
