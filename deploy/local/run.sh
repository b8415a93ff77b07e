#!/usr/bin/env bash
# Runs api, order-writer and cache-invalidator (built into bin/) together in
# the foreground against the local stack. Ctrl-C (or SIGTERM) stops all three
# with SIGTERM, so each shuts down gracefully, and waits for them.
set -uo pipefail
cd "$(dirname "$0")/../.."

api_addr=${SECKILL_API_ADDR:-127.0.0.1:8081}
# A development admin token, so the voucher routes can be tried at once,
# and development mode: login codes go to the api's log (it says so).
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-dev-admin-token-change-me}
export SECKILL_DEV_MODE=${SECKILL_DEV_MODE:-true}
pids=()

stop_all() {
  trap '' INT TERM
  echo "run: stopping api, order-writer, cache-invalidator"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
}
trap stop_all INT TERM

for p in api order-writer cache-invalidator; do
  [ -x "bin/$p" ] || { echo "run: bin/$p missing: run 'make run' or 'make build'" >&2; exit 1; }
  "bin/$p" &
  pids+=($!)
done

for _ in $(seq 1 60); do
  if curl -fsS "http://$api_addr/readyz" >/dev/null 2>&1; then
    cat <<MSG

run: the API is ready at http://$api_addr   (Ctrl-C stops everything)
  curl -s http://$api_addr/readyz
  curl -s -X POST 'http://$api_addr/user/code?phone=13800138000'    (the code is in the api log)
  curl -s -X POST http://$api_addr/user/login -H 'Content-Type: application/json' -d '{"phone":"13800138000","code":"CODE"}'
  curl -s -X POST http://$api_addr/voucher/seckill -H 'X-Admin-Token: $SECKILL_ADMIN_TOKEN' -H 'Content-Type: application/json' \
       -d '{"shopId":1,"title":"100 off","payValue":8000,"actualValue":10000,"stock":100,"beginTime":"2026-01-01T00:00:00Z","endTime":"2037-01-01T00:00:00Z"}'
  curl -s -X POST http://$api_addr/voucher-order/seckill/VOUCHER_ID -H 'authorization: TOKEN'
  admin ports (metrics, pprof): api http://127.0.0.1:9100/metrics, order-writer http://127.0.0.1:9101, cache-invalidator http://127.0.0.1:9102

MSG
    break
  fi
  sleep 0.5
done

# wait returns when a signal arrives (the trap runs) or a child exits; keep
# waiting until every child is gone, and stop the others if one dies.
rc=0
while :; do
  alive=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
  [ "$alive" -gt 0 ] || break
  wait -n "${pids[@]}" 2>/dev/null
  status=$?
  if [ "$status" -ne 0 ] && [ "$status" -lt 128 ]; then
    rc=$status
    echo "run: a program exited with status $status; stopping the others" >&2
    stop_all
  fi
done
echo "run: all stopped"
exit $rc
