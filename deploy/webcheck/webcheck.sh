#!/usr/bin/env bash
# The browser check (make webcheck WEB=<folder>): the course's own web
# client, its html/hmdp folder unchanged, driven in Debian's Chromium
# against the whole system (deploy/local/run.sh), once per session mode.
# The client is not in this repository (it is the course's); give the
# folder it ships in (nginx-1.18.0/html/hmdp). Run with the stack up and
# migrated (make webcheck does both), and nothing else on the run ports.
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { printf 'webcheck: error: %s\n' "$*" >&2; exit 2; }

web=${1:-}
[ -n "$web" ] || die "give the course's html/hmdp folder: make webcheck WEB=/path/to/nginx-1.18.0/html/hmdp"
[ -f "$web/login.html" ] && [ -f "$web/js/common.js" ] || die "$web is not the course's html/hmdp folder (no login.html, js/common.js)"
web=$(cd "$web" && pwd)
command -v node >/dev/null || die "node is not installed (Debian: apt-get install nodejs npm)"
if ! command -v chromium >/dev/null; then
  echo "webcheck: installing Debian's chromium"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null || die "could not install chromium"
fi
(cd deploy/webcheck && { [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund >/dev/null; }) || die "npm ci in deploy/webcheck failed"

api_addr=${SECKILL_API_ADDR:-127.0.0.1:8081}
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-dev-admin-token-change-me} SECKILL_DEV_MODE=true
mkdir -p .stack/webcheck
status=0
for mode in ${WEBCHECK_MODES:-redis jwt}; do
  log=.stack/webcheck/$mode.log
  : > "$log"
  SECKILL_SESSION_MODE=$mode deploy/local/run.sh > "$log" 2>&1 &
  run=$!
  ready=false
  for _ in $(seq 1 120); do
    if curl -fsS "http://$api_addr/readyz" >/dev/null 2>&1; then ready=true; break; fi
    kill -0 "$run" 2>/dev/null || break
    sleep 0.5
  done
  if $ready; then
    WEB_DIR=$web API_URL=http://$api_addr API_LOG=$log SESSION_MODE=$mode SHOTS=$PWD/.stack/webcheck \
      node deploy/webcheck/check.mjs || status=1
  else
    echo "webcheck: the system did not become ready in 60 s ($mode); its output:" >&2
    tail -n 30 "$log" >&2
    status=1
  fi
  kill -TERM "$run" 2>/dev/null || true
  wait "$run" || true
done
[ "$status" -eq 0 ] && echo "webcheck: passed in every mode (screenshots in .stack/webcheck)"
exit "$status"
