#!/usr/bin/env bash
# The project's real servers, run natively on loopback (these machines have no
# Docker engine): Redis 7 and MariaDB 10.11 from Debian's packages, Apache
# Kafka 3.9 (KRaft, one combined broker+controller) from its jars on Maven
# Central.
#
#   stack.sh install   apt-get the servers, fetch the Kafka jars (as root)
#   stack.sh up        start what is not running, wait until each answers,
#                      create users and topics, print the addresses
#   stack.sh up --with-replica   also a Redis replica of the master, as
#                      production runs it (or SECKILL_REDIS_REPLICA=yes)
#   stack.sh up --redis-cluster   also a Redis Cluster of 3 masters and 3
#                      replicas beside the single node (or
#                      SECKILL_REDIS_TOPOLOGY=cluster)
#   stack.sh up --kafka-brokers 3   also a Kafka cluster of three nodes
#                      beside the single broker (or SECKILL_KAFKA_TOPOLOGY=cluster)
#   stack.sh up --mysql-cluster   also a MariaDB Galera cluster of three
#                      nodes behind HAProxy beside the single server (or
#                      SECKILL_MYSQL_TOPOLOGY=cluster)
#   stack.sh down      stop the processes this script started, by their pid
#   stack.sh stop redis|redis-replica|redis-cache|redis-cluster|mariadb|mysql-cluster|kafka|kafka-cluster
#                      stop one of them (the failure tests use it; `up` starts
#                      it again)
#   stack.sh stop|kill kafka-node N   stop (SIGTERM) or kill -9 node N (1-3)
#                      of the Kafka cluster; `up --kafka-brokers 3` restarts it
#   stack.sh stop|kill mysql-node N   the same for node N (1-3) of the
#                      MariaDB cluster; `up --mysql-cluster` restarts it
#   stack.sh freeze|thaw kafka-node|mysql-node N   SIGSTOP (a machine that
#                      stops answering, its connections open) or SIGCONT
#   stack.sh rebuild mysql-node N [DONOR]   node N's state dropped and
#                      joined again by a whole snapshot (SST), from node
#                      DONOR when named (a node whose data is in doubt)
#   stack.sh start mysql-cluster   start what is missing of the MariaDB
#                      cluster and its HAProxy, and nothing else (the
#                      failure tests' rejoin, without the other servers'
#                      checks)
#   stack.sh status    which of them run, and where
#   stack.sh logs [redis|redis-cache|mariadb|kafka]   tail their logs
#
# Everything lives under $SECKILL_STACK_DIR (default: .stack in the repo,
# git-ignored). The ports are the project's own, so a Redis on 6379 or a
# MariaDB on 3306 that the machine already runs is neither used nor touched.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

STACK_DIR=${SECKILL_STACK_DIR:-$repo/.stack}
# shellcheck source=deploy/local/ports
. "$here/ports"
REDIS_PORT=${SECKILL_REDIS_PORT:-$REDIS_PORT_DEFAULT}
REDIS_REPLICA_PORT=${SECKILL_REDIS_REPLICA_PORT:-$REDIS_REPLICA_PORT_DEFAULT}
REDIS_CACHE_PORT=${SECKILL_REDIS_CACHE_PORT:-$REDIS_CACHE_PORT_DEFAULT}
REDIS_REPLICA=${SECKILL_REDIS_REPLICA:-no}
REDIS_TOPOLOGY=${SECKILL_REDIS_TOPOLOGY:-single}
REDIS_CLUSTER_PORT=${SECKILL_REDIS_CLUSTER_PORT:-$REDIS_CLUSTER_PORT_DEFAULT}
REDIS_CLUSTER_NODES=6
MYSQL_PORT=${SECKILL_MYSQL_PORT:-$MYSQL_PORT_DEFAULT}
MYSQL_TOPOLOGY=${SECKILL_MYSQL_TOPOLOGY:-single}
MYSQL_CLUSTER_PORT=${SECKILL_MYSQL_CLUSTER_PORT:-$MYSQL_CLUSTER_PORT_DEFAULT}
MYSQL_CLUSTER_GCOMM_PORT=${SECKILL_MYSQL_CLUSTER_GCOMM_PORT:-$MYSQL_CLUSTER_GCOMM_PORT_DEFAULT}
KAFKA_PORT=${SECKILL_KAFKA_PORT:-$KAFKA_PORT_DEFAULT}
KAFKA_CONTROLLER_PORT=${SECKILL_KAFKA_CONTROLLER_PORT:-$KAFKA_CONTROLLER_PORT_DEFAULT}
KAFKA_HEAP=${SECKILL_KAFKA_HEAP:-512m}
KAFKA_TOPOLOGY=${SECKILL_KAFKA_TOPOLOGY:-single}
KAFKA_CLUSTER_PORT=${SECKILL_KAFKA_CLUSTER_PORT:-$KAFKA_CLUSTER_PORT_DEFAULT}
KAFKA_CLUSTER_HEAP=${SECKILL_KAFKA_CLUSTER_HEAP:-384m}

# The application user owns the project's databases (and creates the
# per-test ones); the canal user is what the binlog follower needs, no more.
MYSQL_APP_USER=seckill
MYSQL_APP_PASSWORD=seckill
MYSQL_CANAL_USER=canal
MYSQL_CANAL_PASSWORD=canal
MYSQL_DATABASE=seckill
# HAProxy's health check of the MariaDB cluster's nodes: reads their state,
# nothing else (galera-check.sh, which HAProxy runs with no environment of
# ours, has the same names). The cluster's users are made from
# galera-users.sql, which names these.
MYSQL_CHECK_USER=galera_check
MYSQL_CHECK_PASSWORD=galera_check

# topic:partitions, from deploy/topics (the compose file's too); the
# orders topic's, the first, may have its partitions set apart
# (SECKILL_ORDER_PARTITIONS).
TOPICS=()
while read -r t || [ -n "$t" ]; do
  case $t in ''|'#'*) continue ;; esac
  if [ ${#TOPICS[@]} -eq 0 ]; then t="${t%%:*}:${SECKILL_ORDER_PARTITIONS:-${t##*:}}"; fi
  TOPICS+=("$t")
done < "$here/../topics"
[ ${#TOPICS[@]} -gt 0 ] || { echo "stack: error: no topics in $here/../topics" >&2; exit 1; }

logs_dir=$STACK_DIR/logs
kafka_libs=$STACK_DIR/kafka/libs

say() { printf 'stack: %s\n' "$*"; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }

need_cmds() {
  local missing=()
  for c in redis-server redis-cli mariadbd mariadb mariadb-install-db mariabackup socat java mvn curl haproxy promtool podman runc nginx chromium python3; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  [ -f /usr/lib/galera/libgalera_smm.so ] || missing+=(galera-4)
  printf '%s\n' "${missing[@]}"
}

cmd_install() {
  local missing
  missing=$(need_cmds)
  if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || die "missing $(echo $missing | tr '\n' ' '); install needs root to apt-get them"
    # nginx and Chromium: the browser test serves a front end the way the
    # course does (its nginx location block) and drives it headless.
    local pkgs=(redis-server redis-tools mariadb-server mariadb-client mariadb-backup galera-4 socat curl ca-certificates haproxy prometheus podman runc nginx-light chromium)
    command -v java >/dev/null 2>&1 || pkgs+=(default-jdk-headless)
    command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
    command -v python3 >/dev/null 2>&1 || pkgs+=(python3)
    say "installing Debian packages: ${pkgs[*]}"
    # Keep the packages' own init scripts from starting system-wide servers
    # on 6379/3306: we run our own instances on our own ports.
    local policy_added=no
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
      policy_added=yes
    fi
    local rc=0
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}"; } || rc=$?
    [ "$policy_added" = yes ] && rm -f /usr/sbin/policy-rc.d
    [ "$rc" = 0 ] || die "apt-get install ${pkgs[*]} failed (exit $rc)"
    missing=$(need_cmds)
    [ -z "$missing" ] || die "still missing after apt-get: $(echo $missing | tr '\n' ' ')"
  fi
  if ! ls "$kafka_libs"/kafka_2.13-3.9.1.jar >/dev/null 2>&1; then
    say "fetching Kafka 3.9.1 jars from Maven Central (pom: deploy/local/kafka/pom.xml)"
    mkdir -p "$kafka_libs"
    mvn -B -q -f "$here/kafka/pom.xml" dependency:copy-dependencies -DoutputDirectory="$kafka_libs" \
      || die "mvn could not fetch the Kafka jars (see the output above)"
    ls "$kafka_libs"/kafka_2.13-3.9.1.jar >/dev/null 2>&1 || die "kafka_2.13-3.9.1.jar not in $kafka_libs after mvn"
  fi
  say "installed: redis $(redis-server --version | sed -n "s/.*v=\([0-9.]*\).*/\1/p"), $(mariadbd --version | awk '{print $3}'), kafka 3.9.1 jars in $kafka_libs"
}

installed() {
  [ -z "$(need_cmds)" ] && ls "$kafka_libs"/kafka_2.13-3.9.1.jar >/dev/null 2>&1
}

# pid_alive FILE PATTERN: the pid in FILE runs and its command line still
# mentions PATTERN (our config), so a recycled pid is never taken for ours.
pid_alive() {
  local file=$1 pattern=$2 pid
  [ -s "$file" ] || return 1
  pid=$(cat "$file")
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$pattern"
}

wait_for() {
  local what=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
  say "$what answers"
}

# stop_pid NAME PIDFILE PATTERN [SECONDS]: TERM, then KILL after SECONDS
# (30 by default).
stop_pid() {
  local name=$1 file=$2 pattern=$3 grace=${4:-30} pid i
  if ! pid_alive "$file" "$pattern"; then
    say "$name not running"
    rm -f "$file"
    return
  fi
  pid=$(cat "$file")
  # It may have exited since pid_alive looked.
  kill -TERM "$pid" 2>/dev/null || true
  # A frozen server (stack.sh freeze) acts on SIGTERM only once woken.
  kill -CONT "$pid" 2>/dev/null || true
  for i in $(seq 1 $((grace * 2))); do
    kill -0 "$pid" 2>/dev/null || { say "$name stopped (pid $pid)"; rm -f "$file"; return; }
    sleep 0.5
  done
  say "$name did not stop within ${grace}s; sending SIGKILL to $pid"
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}

# wait_all PID...: waits for every one, and fails if any failed.
wait_all() {
  local pid rc=0
  for pid in "$@"; do wait "$pid" || rc=1; done
  return $rc
}

# Each family of servers in a file of its own: reading one defines its
# functions and paths and starts nothing; the commands below call them.
# shellcheck source=deploy/local/stack-redis.sh
. "$here/stack-redis.sh"
# shellcheck source=deploy/local/stack-mariadb.sh
. "$here/stack-mariadb.sh"
# shellcheck source=deploy/local/stack-kafka.sh
. "$here/stack-kafka.sh"

# --- commands --------------------------------------------------------------

print_env() {
  cat <<EOF
stack: up. Addresses (the programs' defaults; the tests read the SECKILL_TEST_* ones):
  REDIS_ADDR=127.0.0.1:$REDIS_PORT
  CACHE_REDIS_ADDR=127.0.0.1:$REDIS_CACHE_PORT   (SECKILL_CACHE_REDIS_ADDR: the caches' Redis)
EOF
  if [ "$KAFKA_TOPOLOGY" = cluster ]; then
    echo "  KAFKA_CLUSTER=$(kcluster_seeds)   (SECKILL_KAFKA_BROKERS for the Kafka cluster)"
  fi
  if [ "$REDIS_TOPOLOGY" = cluster ]; then
    echo "  REDIS_CLUSTER=$(cluster_seeds)   (SECKILL_REDIS_CLUSTER: the cluster's seeds)"
  fi
  cat <<EOF
  MYSQL_DSN=$MYSQL_APP_USER:$MYSQL_APP_PASSWORD@tcp(127.0.0.1:$MYSQL_PORT)/$MYSQL_DATABASE
EOF
  if [ "$MYSQL_TOPOLOGY" = cluster ]; then
    echo "  MYSQL_CLUSTER=127.0.0.1:$MYSQL_CLUSTER_PORT   (HAProxy in front of the MariaDB cluster: SECKILL_MYSQL_DSN and SECKILL_BINLOG_ADDR)"
  fi
  cat <<EOF
  BINLOG_USER=$MYSQL_CANAL_USER (password $MYSQL_CANAL_PASSWORD)
  KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT
EOF
}

cmd_up() {
  # A wrong topology stops the start before anything is started.
  case "$REDIS_TOPOLOGY" in single | cluster) ;; *) die "SECKILL_REDIS_TOPOLOGY=$REDIS_TOPOLOGY: say single or cluster" ;; esac
  case "$KAFKA_TOPOLOGY" in single | cluster) ;; *) die "SECKILL_KAFKA_TOPOLOGY=$KAFKA_TOPOLOGY: say single or cluster" ;; esac
  case "$MYSQL_TOPOLOGY" in single | cluster) ;; *) die "SECKILL_MYSQL_TOPOLOGY=$MYSQL_TOPOLOGY: say single or cluster" ;; esac
  installed || die "servers or Kafka jars missing: run '$0 install' (make does it for you)"
  mkdir -p "$STACK_DIR"
  # The three families start side by side: each mostly waits (MariaDB's
  # first start, the JVMs, the cluster handshakes), and none needs another.
  local pids=()
  { redis_up
    redis_cache_up
    case "$REDIS_REPLICA" in
      yes | 1 | true) redis_replica_up ;;
    esac
    if [ "$REDIS_TOPOLOGY" = cluster ]; then redis_cluster_up; fi; } &
  pids+=($!)
  { mariadb_up
    if [ "$MYSQL_TOPOLOGY" = cluster ]; then mariadb_cluster_up; fi; } &
  pids+=($!)
  # The single broker and the cluster side by side too.
  kafka_logging
  kafka_up &
  pids+=($!)
  if [ "$KAFKA_TOPOLOGY" = cluster ]; then
    kafka_cluster_up &
    pids+=($!)
  fi
  wait_all "${pids[@]}" || die "a server did not start: see the errors above and '$0 logs'"
  print_env
}

# The servers stop side by side: each takes seconds to flush and leave,
# and none of them waits for another (the Kafka nodes and the MariaDB
# cluster's nodes keep their own order inside their group).
cmd_down() {
  local pids=()
  { kafka_cluster_down; stop_pid kafka "$kafka_pid" "$kafka_props"; } &
  pids+=($!)
  stop_pid mariadb "$mysql_pid" "$mysql_cnf" &
  pids+=($!)
  mariadb_cluster_down &
  pids+=($!)
  { stop_pid redis "$redis_pid" "$REDIS_PORT"
    stop_pid "redis (caches)" "$cache_pid" "$REDIS_CACHE_PORT"
    if pid_alive "$replica_pid" "$REDIS_REPLICA_PORT"; then stop_pid "redis replica" "$replica_pid" "$REDIS_REPLICA_PORT"; fi; } &
  pids+=($!)
  redis_cluster_down &
  pids+=($!)
  wait_all "${pids[@]}"
}

cmd_stop() {
  case "${1:-}" in
    redis) stop_pid redis "$redis_pid" "$REDIS_PORT" ;;
    redis-replica) stop_pid "redis replica" "$replica_pid" "$REDIS_REPLICA_PORT" ;;
    redis-cache) stop_pid "redis (caches)" "$cache_pid" "$REDIS_CACHE_PORT" ;;
    redis-cluster) redis_cluster_down ;;
    kafka-cluster) kafka_cluster_down ;;
    kafka-node) kcluster_node_arg "${2:-}"; stop_pid "kafka cluster node $2" "$(kcluster_pid "$2")" "$(kcluster_props "$2")" ;;
    mariadb) stop_pid mariadb "$mysql_pid" "$mysql_cnf" ;;
    mysql-cluster) mariadb_cluster_down ;;
    mysql-node) mcluster_node_arg "${2:-}"; stop_pid "mariadb cluster node $2" "$(mcluster_pid "$2")" "$(mcluster_cnf "$2")" ;;
    kafka) stop_pid kafka "$kafka_pid" "$kafka_props" ;;
    *) die "stop: which server? redis, redis-replica, redis-cache, redis-cluster, mariadb, mysql-cluster, mysql-node N, kafka, kafka-cluster or kafka-node N" ;;
  esac
}

kcluster_node_arg() {
  case "${1:-}" in
    [1-9]) [ "$1" -le "$KAFKA_CLUSTER_NODES" ] || die "kafka-node $1: the cluster has nodes 1 to $KAFKA_CLUSTER_NODES" ;;
    *) die "kafka-node ${1:-(no number)}: say which node, 1 to $KAFKA_CLUSTER_NODES" ;;
  esac
}

mcluster_node_arg() {
  case "${1:-}" in
    [1-9]) [ "$1" -le "$MYSQL_CLUSTER_NODES" ] || die "mysql-node $1: the cluster has nodes 1 to $MYSQL_CLUSTER_NODES" ;;
    *) die "mysql-node ${1:-(no number)}: say which node, 1 to $MYSQL_CLUSTER_NODES" ;;
  esac
}

# cmd_signal VERB kafka-node|mysql-node N: kill -9 (kill), as a crashed
# machine, nothing flushed; SIGSTOP (freeze), as a machine that stops
# answering with its connections open; SIGCONT (thaw).
cmd_signal() {
  local verb=$1 pid cmdline sig done
  shift
  case $verb in
    kill) sig=KILL done="killed (SIGKILL)" ;;
    freeze) sig=STOP done="frozen (SIGSTOP)" ;;
    thaw) sig=CONT done="thawed (SIGCONT)" ;;
  esac
  case "${1:-}" in
    kafka-node) kcluster_node_arg "${2:-}"; pid=$(kcluster_pid "$2") cmdline=$(kcluster_props "$2") ;;
    mysql-node) mcluster_node_arg "${2:-}"; pid=$(mcluster_pid "$2") cmdline=$(mcluster_cnf "$2") ;;
    *) die "$verb: only kafka-node N or mysql-node N (the other servers: stop)" ;;
  esac
  pid_alive "$pid" "$cmdline" || die "$1 $2 is not running"
  kill "-$sig" "$(cat "$pid")"
  [ "$sig" != KILL ] || rm -f "$pid"
  say "$1 $2 $done"
}

cmd_status() {
  local rc=0
  for s in "redis:$redis_pid:$REDIS_PORT:127.0.0.1:$REDIS_PORT" \
           "rcache:$cache_pid:$REDIS_CACHE_PORT:127.0.0.1:$REDIS_CACHE_PORT" \
           "mariadb:$mysql_pid:$mysql_cnf:127.0.0.1:$MYSQL_PORT" \
           "kafka:$kafka_pid:$kafka_props:127.0.0.1:$KAFKA_PORT"; do
    IFS=: read -r name file pattern host port <<<"$s"
    if pid_alive "$file" "$pattern"; then
      printf '%-8s running  pid %-7s %s:%s\n' "$name" "$(cat "$file")" "$host" "$port"
    else
      printf '%-8s stopped\n' "$name"
      rc=3
    fi
  done
  if pid_alive "$replica_pid" "$REDIS_REPLICA_PORT"; then
    printf '%-8s running  pid %-7s %s:%s (replica of %s)\n' "replica" "$(cat "$replica_pid")" 127.0.0.1 "$REDIS_REPLICA_PORT" "$REDIS_PORT"
  fi
  redis_cluster_status
  mariadb_cluster_status
  kafka_cluster_status
  return $rc
}

cmd_logs() {
  case "${1:-all}" in
    redis) tail -n 100 -f "$logs_dir/redis.log" ;;
    redis-cache) tail -n 100 -f "$logs_dir/redis-cache.log" ;;
    mariadb) tail -n 100 -f "$logs_dir/mariadb.log" ;;
    kafka) tail -n 100 -f "$logs_dir/kafka.log" ;;
    all) tail -n 30 -f "$logs_dir/redis.log" "$logs_dir/mariadb.log" "$logs_dir/kafka.log" ;;
    *) die "logs: unknown server '$1' (redis, redis-cache, mariadb, kafka)" ;;
  esac
}

case "${1:-}" in
  install) cmd_install ;;
  up)
    shift
    while [ $# -gt 0 ]; do
      case "$1" in
        --with-replica) REDIS_REPLICA=yes ;;
        --redis-cluster) REDIS_TOPOLOGY=cluster ;;
        --mysql-cluster) MYSQL_TOPOLOGY=cluster ;;
        --kafka-brokers)
          shift
          case "${1:-}" in
            1) KAFKA_TOPOLOGY=single ;;
            3) KAFKA_TOPOLOGY=cluster ;;
            *) die "up: --kafka-brokers ${1:-(no number)}: the stack runs one broker, or a cluster of 3" ;;
          esac ;;
        *) die "up: unknown option $1 (--with-replica, --redis-cluster, --mysql-cluster, --kafka-brokers 3)" ;;
      esac
      shift
    done
    cmd_up ;;
  down) cmd_down ;;
  stop) shift; cmd_stop "$@" ;;
  start)
    [ "${2:-}" = mysql-cluster ] || die "start: only mysql-cluster (the others: up)"
    installed || die "servers or Kafka jars missing: run '$0 install' (make does it for you)"
    mariadb_cluster_up ;;
  kill|freeze|thaw) cmd_signal "$@" ;;
  rebuild)
    [ "${2:-}" = mysql-node ] || die "rebuild: only mysql-node N [DONOR]"
    mcluster_node_arg "${3:-}"
    [ -z "${4:-}" ] || mcluster_node_arg "$4"
    [ "${4:-}" != "$3" ] || die "rebuild: node $3 cannot be its own donor"
    mcluster_node_config "$3"
    mcluster_rebuild "$3" "${4:-}" ;;
  status) cmd_status ;;
  logs) shift; cmd_logs "$@" ;;
  env) print_env ;;
  *) echo "usage: $0 install|up|down|stop SERVER|kill|freeze|thaw kafka-node|mysql-node N|rebuild mysql-node N [DONOR]|start mysql-cluster|status|logs [SERVER]|env" >&2; exit 2 ;;
esac
