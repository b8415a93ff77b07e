#!/usr/bin/env bash
# Load runs against a real API process on the local stack; prints figures,
# asserts nothing (the machines are shared and noisy).
set -euo pipefail
cd "$(dirname "$0")/../.."

addr=${BENCH_API_ADDR:-127.0.0.1:18081}
users=${BENCH_LOGIN_USERS:-5000}
workers=${BENCH_WORKERS:-32}

SECKILL_API_ADDR=$addr SECKILL_LOG_LEVEL=warn SECKILL_RATE_LOGIN_IP=off bin/api &
api_pid=$!
trap 'kill -TERM $api_pid 2>/dev/null; wait $api_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://$addr/readyz" >/dev/null || { echo "bench: the API at $addr did not become ready" >&2; exit 1; }

echo "bench: POST /user/login, $users users x 2 logins, $workers concurrent clients, one API process, $(nproc) cores"
bin/loadgen login -api "http://$addr" -users "$users" -workers "$workers"
