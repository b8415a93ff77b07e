#!/usr/bin/env bash
# The load balancer in front of several api instances: HAProxy from
# Debian's package (stack.sh install). run.sh and the failure tests both
# write its configuration here.
#
#   haproxy.sh config LISTEN BACKEND...   print the configuration (HTTP mode)
#   haproxy.sh config-tcp LISTEN BACKEND...
#                                         the same in TCP mode, the client's
#                                         address in a PROXY v2 header
#   haproxy.sh source                     the address it connects to the
#                                         instances from: their only
#                                         trusted proxy (run.sh)
#
# Each client keeps its address: the balancer *sets* X-Forwarded-For to
# the connection's source (a client's own header is replaced, never
# appended to, so it cannot name another address) and connects to the
# instances from an address of its own, which they trust and nothing else
# uses. X-Forwarded-Proto is set to http: this balancer speaks plain HTTP.
#
# Each backend is health-checked through /readyz every 500 ms: two failures
# take it out, two answers put it back. A request is retried on another
# instance only when it could not be sent (HAProxy's default retry-on is
# conn-failure): a POST that reached an instance which then died is never
# sent twice — it is not idempotent to the balancer, the buyer sees a 502
# and asks again, and the gate answers the second ask with the same order.
#
# TCP mode (config-tcp) passes bytes: the client's address goes in a PROXY
# protocol v2 header at the start of each connection to an instance (which
# reads one from its trusted proxies only), the health checks are the same,
# and a connection is retried only when it could not be made, before any
# byte of a request was sent. It balances connections, not requests, and
# its own errors are a closed connection, not the JSON answers below.
# docs/performance.md measures the two; run.sh and the
# bench use HTTP mode.
set -euo pipefail

SOURCE=127.0.0.254

config() {
  local mode=$1 listen=$2 i=1 b maxconn hard
  shift 2
  # Two descriptors a connection (client and server side): as many
  # connections as the hard descriptor limit allows, up to 8,000
  # (HAProxy refuses to start when it cannot raise its limit that far).
  hard=$(ulimit -Hn)
  maxconn=8000
  if [ "$hard" != unlimited ] && [ $(((hard - 100) / 2)) -lt $maxconn ]; then maxconn=$(((hard - 100) / 2)); fi
  cat <<CFG
global
  maxconn $maxconn
  log stderr format short local0 notice

CFG
  if [ "$mode" = http ]; then
    cat <<CFG
defaults
  mode http
  log global
  option httplog
  option dontlog-normal
  timeout connect 1s
  timeout client 30s
  timeout server 30s
  timeout http-keep-alive 30s
  retries 2
  option redispatch 1
  # The balancer's own errors in the API's Result envelope, so a client
  # (the course's web page too) reads them as it reads the API's.
  http-error status 502 content-type application/json hdr Retry-After 1 string "{\"success\":false,\"errorMsg\":\"the server handling your request went away: try again\",\"data\":null,\"total\":null}"
  http-error status 503 content-type application/json hdr Retry-After 1 string "{\"success\":false,\"errorMsg\":\"no server can take your request now: try again\",\"data\":null,\"total\":null}"
  http-error status 504 content-type application/json hdr Retry-After 1 string "{\"success\":false,\"errorMsg\":\"the server did not answer in time: try again\",\"data\":null,\"total\":null}"

frontend seckill
  bind $listen
  http-request set-header X-Forwarded-For %[src]
  http-request set-header X-Forwarded-Proto http
  http-request del-header Forwarded
  default_backend api

CFG
  else
    cat <<CFG
defaults
  mode tcp
  log global
  option dontlognull
  timeout connect 1s
  timeout client 30s
  timeout server 30s
  retries 2
  option redispatch 1

frontend seckill
  bind $listen
  default_backend api

CFG
  fi
  local proxy=""
  [ "$mode" = http ] || proxy=" send-proxy-v2 check-send-proxy"
  cat <<CFG
backend api
  balance roundrobin
  source $SOURCE
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2 maxconn 4000$proxy
CFG
  for b in "$@"; do
    echo "  server api$i $b check"
    i=$((i + 1))
  done
}

case "${1:-}" in
  config|config-tcp)
    mode=http
    [ "$1" = config ] || mode=tcp
    shift
    [ $# -ge 2 ] || { echo "usage: $0 config|config-tcp LISTEN BACKEND..." >&2; exit 2; }
    config "$mode" "$@" ;;
  source) echo "$SOURCE" ;;
  *) echo "usage: $0 config|config-tcp LISTEN BACKEND... | source" >&2; exit 2 ;;
esac
