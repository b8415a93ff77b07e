#!/usr/bin/env bash
# Runs the programs (built into bin/) together in the foreground against the
# local stack: SECKILL_API_INSTANCES api instances (default 1; more than one
# behind HAProxy on SECKILL_API_ADDR), SECKILL_ORDER_WRITERS order-writers
# (default 1) in one consumer group, and the cache-invalidator. Ctrl-C (or
# SIGTERM) stops them all with SIGTERM, so each shuts down gracefully, and
# waits for them.
set -uo pipefail
cd "$(dirname "$0")/../.."

die() { printf 'run: error: %s\n' "$*" >&2; exit 2; }

bin=${SECKILL_BIN_DIR:-bin}
api_addr=${SECKILL_API_ADDR:-127.0.0.1:8081}
apis=${SECKILL_API_INSTANCES:-1}
writers=${SECKILL_ORDER_WRITERS:-1}
# A development admin token, so the voucher routes can be tried at once,
# and development mode: login codes go to the api's log (it says so).
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-dev-admin-token-change-me}
export SECKILL_DEV_MODE=${SECKILL_DEV_MODE:-true}

# What cannot work stops the start before anything runs.
[[ $apis =~ ^[1-9][0-9]?$ ]] || die "SECKILL_API_INSTANCES=$apis: say how many api instances, 1 to 99"
[[ $writers =~ ^[1-9][0-9]?$ ]] || die "SECKILL_ORDER_WRITERS=$writers: say how many order-writers, 1 to 99"
for p in api order-writer cache-invalidator; do
  [ -x "$bin/$p" ] || die "$bin/$p missing: run 'make run' or 'make build'"
done
if [ "$apis" -gt 1 ]; then command -v haproxy >/dev/null || die "haproxy is not installed: deploy/local/stack.sh install"; fi
[ -x "$bin/seckillctl" ] || die "$bin/seckillctl missing: run 'make run' or 'make build'"

# SECKILL_DEV_TLS=true: HTTPS with a development certificate made once in
# .stack/tls (curl --cacert .stack/tls/cert.pem). Several instances would
# need TLS at the load balancer, which is not configured here.
scheme=http curl_tls=()
case ${SECKILL_DEV_TLS:-false} in
  true)
    [ "$apis" -eq 1 ] || die "SECKILL_DEV_TLS=true serves TLS from the api itself: one instance only (SECKILL_API_INSTANCES=1)"
    [ -s .stack/tls/cert.pem ] || "$bin/seckillctl" dev-cert .stack/tls >/dev/null || die "could not write a development certificate"
    export SECKILL_TLS_CERT=$PWD/.stack/tls/cert.pem SECKILL_TLS_KEY=$PWD/.stack/tls/key.pem
    scheme=https curl_tls=(--cacert "$SECKILL_TLS_CERT") ;;
  false) ;;
  *) die "SECKILL_DEV_TLS=$SECKILL_DEV_TLS: true or false" ;;
esac
# The jwt session mode needs signing keys: a development key file is made
# once in .stack unless keys are given.
if [ "${SECKILL_SESSION_MODE:-redis}" = jwt ] && [ -z "${SECKILL_JWT_KEYS:-}${SECKILL_JWT_KEYS_FILE:-}" ]; then
  if [ ! -s .stack/jwt-keys.json ]; then
    mkdir -p .stack
    key=$("$bin/seckillctl" jwt-key dev-1 HS256) || die "could not make a jwt key"
    (umask 077; printf '{"sign":"dev-1","keys":[%s]}\n' "$key" > .stack/jwt-keys.json)
  fi
  export SECKILL_JWT_KEYS_FILE=$PWD/.stack/jwt-keys.json
fi

host=${api_addr%:*} port=${api_addr##*:}
taken() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
# The instances' own ports: the public port + 100 + i, admin ports 9110 + i
# (one instance keeps the public address and admin port 9100).
addrs=() admins=()
if [ "$apis" -eq 1 ]; then
  addrs=("$api_addr") admins=("${SECKILL_ADMIN_ADDR:-127.0.0.1:9100}")
else
  for i in $(seq 1 "$apis"); do addrs+=("$host:$((port + 100 + i))") admins+=("127.0.0.1:$((9110 + i))"); done
fi
for a in "${addrs[@]}" "${admins[@]}"; do
  taken "${a%:*}" "${a##*:}" && die "$a is taken by another program: free it, or set SECKILL_API_ADDR"
done
if [ "$apis" -gt 1 ] && taken "$host" "$port"; then
  die "the load balancer's address $api_addr is taken by another program: free it, or set SECKILL_API_ADDR"
fi

pids=()
stop_all() {
  trap '' INT TERM
  echo "run: stopping everything"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
}
trap stop_all INT TERM

# Behind the balancer the instances trust exactly it: the address it
# connects from sets X-Forwarded-For, nobody else's is believed.
if [ "$apis" -gt 1 ]; then export SECKILL_API_TRUSTED_PROXIES; SECKILL_API_TRUSTED_PROXIES=$(deploy/local/haproxy.sh source); fi
for i in $(seq 0 $((apis - 1))); do
  SECKILL_API_ADDR=${addrs[$i]} SECKILL_ADMIN_ADDR=${admins[$i]} "$bin/api" &
  pids+=($!)
done
for i in $(seq 1 "$writers"); do
  if [ "$writers" -eq 1 ]; then "$bin/order-writer" & else SECKILL_ADMIN_ADDR=127.0.0.1:$((9130 + i)) "$bin/order-writer" & fi
  pids+=($!)
done
"$bin/cache-invalidator" &
pids+=($!)
if [ "$apis" -gt 1 ]; then
  mkdir -p .stack
  deploy/local/haproxy.sh config "$api_addr" "${addrs[@]}" > .stack/haproxy.cfg
  haproxy -db -f .stack/haproxy.cfg &
  pids+=($!)
fi

for _ in $(seq 1 60); do
  if curl -fsS "${curl_tls[@]}" "$scheme://$api_addr/readyz" >/dev/null 2>&1; then
    cat <<MSG

run: the API is ready at $scheme://$api_addr   (Ctrl-C stops everything; sessions: ${SECKILL_SESSION_MODE:-redis})
  $apis api instance(s)$([ "$apis" -gt 1 ] && echo " behind HAProxy (${addrs[*]})"), $writers order-writer(s), the cache-invalidator
  curl -s ${curl_tls[*]} $scheme://$api_addr/readyz
  curl -s ${curl_tls[*]} -X POST '$scheme://$api_addr/user/code?phone=13800138000'    (the code is in the api log)
  curl -s ${curl_tls[*]} -X POST $scheme://$api_addr/user/login -H 'Content-Type: application/json' -d '{"phone":"13800138000","code":"CODE"}'
  curl -s ${curl_tls[*]} -X POST $scheme://$api_addr/voucher/seckill -H 'X-Admin-Token: $SECKILL_ADMIN_TOKEN' -H 'Content-Type: application/json' \\
       -d '{"shopId":1,"title":"100 off","payValue":8000,"actualValue":10000,"stock":100,"beginTime":"2026-01-01T00:00:00Z","endTime":"2037-01-01T00:00:00Z"}'
  curl -s ${curl_tls[*]} -X POST $scheme://$api_addr/voucher-order/seckill/VOUCHER_ID -H 'authorization: TOKEN'
  admin ports (metrics, pprof): api ${admins[*]}, order-writer $([ "$writers" -eq 1 ] && echo 127.0.0.1:9101 || echo "127.0.0.1:9131..$((9130 + writers))"), cache-invalidator 127.0.0.1:9102

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
