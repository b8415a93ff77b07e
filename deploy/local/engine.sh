#!/usr/bin/env bash
# A container engine that answers the Docker API, for testcontainers-go and
# the compose file: podman's (podman system service) on a unix socket of
# the stack's. These machines have no Docker engine.
#
#   engine.sh up     start the service unless it answers already
#   engine.sh env    print what a client needs: DOCKER_HOST, Ryuk off (its
#                    image is on a registry this machine cannot reach;
#                    engine.sh down removes the tests' containers instead),
#                    and the published ports reached on loopback (the
#                    tests run on the engine's host, though it looks like
#                    a container, where testcontainers-go would take the
#                    gateway's address)
#   engine.sh conf   write the containers.conf below, print its path (for
#                    podman's command line: deploy/local/compose.sh)
#   engine.sh down   remove the containers testcontainers-go started, stop
#                    the service
#
# The containers run with runc (crun refuses this machine's hybrid
# cgroups) and the limits this shell has (podman's default RLIMIT_NPROC is
# above what the sandbox lets a process set): a containers.conf of the
# stack's, given to the service alone.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${SECKILL_STACK_DIR:-$repo/.stack}/engine
sock=$dir/podman.sock
pid=$dir/podman.pid
conf=$dir/containers.conf
log=$dir/podman.log

say() { echo "engine: $*" >&2; }
die() { say "$*"; exit 1; }

answers() { curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping > /dev/null 2>&1; }

running() { [ -s "$pid" ] && kill -0 "$(cat "$pid")" 2> /dev/null; }

# write_conf: the containers.conf the service runs with, which podman's
# own command line (podman-compose's) takes as CONTAINERS_CONF too.
write_conf() {
  local nofile
  mkdir -p "$dir"
  nofile=$(ulimit -Hn)
  [ "$nofile" != unlimited ] || nofile=1048576
  cat > "$conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]

[engine]
runtime = "runc"
EOF
}

up() {
  command -v podman > /dev/null || die "podman is not installed: deploy/local/stack.sh install"
  command -v runc > /dev/null || die "runc is not installed: deploy/local/stack.sh install"
  if answers; then return; fi
  mkdir -p "$dir"
  # A unix socket's path is at most 107 bytes.
  [ ${#sock} -le 107 ] || die "$sock: longer than a unix socket's path may be; set SECKILL_STACK_DIR to a shorter directory"
  write_conf
  rm -f "$sock"
  CONTAINERS_CONF=$conf setsid podman system service --time=0 "unix://$sock" > "$log" 2>&1 < /dev/null &
  echo $! > "$pid"
  local i
  for i in $(seq 1 50); do
    if answers; then say "podman's Docker API answers on $sock"; return; fi
    running || break
    sleep 0.2
  done
  die "podman system service did not answer on $sock; see $log"
}

down() {
  if answers; then
    local ids
    ids=$(podman ps -aq --filter label=org.testcontainers=true)
    [ -z "$ids" ] || podman rm -f $ids > /dev/null
  fi
  if running; then kill "$(cat "$pid")"; fi
  rm -f "$pid" "$sock"
}

case "${1:-}" in
  up) up ;;
  env) echo "DOCKER_HOST=unix://$sock TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1" ;;
  conf) write_conf; echo "$conf" ;;
  down) down ;;
  *) echo "usage: $0 up|env|conf|down" >&2; exit 2 ;;
esac
