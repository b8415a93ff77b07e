#!/usr/bin/env bash
# deploy/docker-compose.yml under podman, as make test runs it:
# podman-compose (pinned: deploy/local/compose-requirements.txt, in a venv
# of the stack's) with podman's command line set as engine.sh sets its
# service, on images built on this machine (no registry is reachable
# here): the servers' (images.sh) and the programs' (make image).
#
#   compose.sh install       podman-compose into .stack/compose unless there,
#                            and podman's dnsname plugin (Debian's)
#   compose.sh run ARGS...   podman-compose ARGS, the local images selected
#                            by the compose file's variables, with
#                            deploy/docker/podman.yml over it (COMPOSE_FILE)
#
# The compose file's ports are the stack's: make test runs it in a network
# namespace of its own (unshare --net), where nothing else listens.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${SECKILL_STACK_DIR:-$repo/.stack}/compose

say() { echo "compose: $*" >&2; }
die() { say "$*"; exit 1; }

install() {
  # The compose file's containers find each other by name (podman's CNI).
  if [ ! -x /usr/lib/cni/dnsname ]; then
    [ "$(id -u)" = 0 ] || die "podman's dnsname plugin is missing: apt-get install golang-github-containernetworking-plugin-dnsname (as root)"
    { apt-get update -q > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends golang-github-containernetworking-plugin-dnsname > /dev/null; } \
      || die "apt-get install golang-github-containernetworking-plugin-dnsname failed"
  fi
  [ -x "$venv/bin/podman-compose" ] && return
  python3 -c 'import venv, ensurepip' 2> /dev/null || die "Python 3 with venv is missing (Debian: apt-get install python3 python3-venv)"
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/compose-requirements.txt"; } \
    || { rm -rf "$venv"; die "could not install podman-compose in $venv from PyPI ($here/compose-requirements.txt)"; }
}

run() {
  [ -x "$venv/bin/podman-compose" ] || die "podman-compose is not installed: $0 install"
  local images line name value p
  images=$("$here/images.sh" env) || die "the servers' images are not known: $here/images.sh build"
  # The servers' images, under the compose file's names for them.
  while read -r line; do
    name=${line%%=*} value=${line#*=}
    podman image exists "$value" || die "no image $value: $here/images.sh build"
    export "${name/SECKILL_TEST_/SECKILL_}=$value"
  done <<< "$images"
  for p in api order-writer cache-invalidator seckillctl; do
    podman image exists "localhost/seckill/$p" || die "no image localhost/seckill/$p: make image"
  done
  export SECKILL_IMAGES=localhost/seckill
  # The compose file with podman's deviations over it, for a caller that
  # names no file (-f) and no COMPOSE_FILE of its own.
  export COMPOSE_FILE=${COMPOSE_FILE:-$repo/deploy/docker-compose.yml:$repo/deploy/docker/podman.yml}
  # The servers' image is MariaDB's.
  export SECKILL_MYSQL_INIT=./docker/mariadb-init.sql SECKILL_BINLOG_FLAVOR=mariadb
  CONTAINERS_CONF=$("$here/engine.sh" conf)
  export CONTAINERS_CONF
  exec "$venv/bin/podman-compose" "$@"
}

case "${1:-}" in
  install) install ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 install|run ARGS..." >&2; exit 2 ;;
esac
