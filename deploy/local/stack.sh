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

# --- Redis -----------------------------------------------------------------

redis_conf=$STACK_DIR/redis/redis.conf
redis_pid=$STACK_DIR/redis/redis.pid

redis_up() {
  mkdir -p "$STACK_DIR/redis" "$logs_dir"
  # appendfsync everysec: at most a second of writes lost on a crash, at a
  # fraction of the cost of fsync on every write (the notes' trade-off).
  # noeviction: what this Redis holds is not to be dropped to make room
  # (the sale's state, the sessions, the login codes); when full it
  # refuses writes, which the programs answer 503. The caches live on the
  # caches' Redis (redis_cache_up), which evicts them.
  cat > "$redis_conf" <<EOF
bind 127.0.0.1
port $REDIS_PORT
protected-mode yes
daemonize yes
pidfile $redis_pid
logfile $logs_dir/redis.log
dir $STACK_DIR/redis
appendonly yes
appendfsync everysec
save ""
maxmemory 512mb
maxmemory-policy noeviction
EOF
  redis_start redis "$redis_conf" "$redis_pid" "$REDIS_PORT" "$logs_dir/redis.log"
}

# redis_start NAME CONF PIDFILE PORT LOG: starts one node unless it runs,
# and waits for its PING.
redis_start() {
  local name=$1 conf=$2 pid=$3 port=$4 log=$5
  if pid_alive "$pid" "$port"; then
    say "$name already running (pid $(cat "$pid"))"
  else
    redis-server "$conf" || die "$name did not start; see $log"
  fi
  wait_for "$name 127.0.0.1:$port" 30 bash -c "[ \"\$(redis-cli -h 127.0.0.1 -p $port ping)\" = PONG ]" \
    || die "$name did not answer PING on 127.0.0.1:$port; see $log"
}

# The caches' Redis: the shop caches, their null markers and the order
# status answers, which MySQL can always give again. allkeys-lru: when full
# it evicts the least recently used of them, and nothing else is there to
# evict; no persistence, since a restart only costs MySQL the reads.
cache_conf=$STACK_DIR/redis-cache/redis.conf
cache_pid=$STACK_DIR/redis-cache/redis.pid

redis_cache_up() {
  mkdir -p "$STACK_DIR/redis-cache" "$logs_dir"
  cat > "$cache_conf" <<EOF
bind 127.0.0.1
port $REDIS_CACHE_PORT
protected-mode yes
daemonize yes
pidfile $cache_pid
logfile $logs_dir/redis-cache.log
dir $STACK_DIR/redis-cache
appendonly no
save ""
maxmemory 128mb
maxmemory-policy allkeys-lru
EOF
  redis_start "redis (caches)" "$cache_conf" "$cache_pid" "$REDIS_CACHE_PORT" "$logs_dir/redis-cache.log"
}

# A replica of the master, as production runs Redis: replication is
# asynchronous, so a failover to it can lose the master's last writes,
# which is what the sales' replication-id stamps and reconcile are for. To
# fail over by hand: kill the master, `redis-cli -p $REDIS_REPLICA_PORT
# replicaof no one`, and point the programs (SECKILL_REDIS_ADDR) at it.
# It keeps no AOF of its own: its copy is the master's stream.
replica_conf=$STACK_DIR/redis-replica/redis.conf
replica_pid=$STACK_DIR/redis-replica/redis.pid

redis_replica_up() {
  mkdir -p "$STACK_DIR/redis-replica" "$logs_dir"
  sed -e "s|^port .*|port $REDIS_REPLICA_PORT|" -e "s|^pidfile .*|pidfile $replica_pid|" \
    -e "s|^logfile .*|logfile $logs_dir/redis-replica.log|" -e "s|^dir .*|dir $STACK_DIR/redis-replica|" \
    -e "s|^appendonly .*|appendonly no|" "$redis_conf" > "$replica_conf"
  echo "replicaof 127.0.0.1 $REDIS_PORT" >> "$replica_conf"
  if pid_alive "$replica_pid" "$REDIS_REPLICA_PORT"; then
    say "redis replica already running (pid $(cat "$replica_pid"))"
  else
    redis-server "$replica_conf" || die "the redis replica did not start; see $logs_dir/redis-replica.log"
  fi
  wait_for "redis replica 127.0.0.1:$REDIS_REPLICA_PORT (in sync)" 60 bash -c \
    "redis-cli -h 127.0.0.1 -p $REDIS_REPLICA_PORT info replication | grep -q '^master_link_status:up'" \
    || die "the redis replica did not sync with the master; see $logs_dir/redis-replica.log"
}

# A Redis Cluster as operators run it: three masters, each with a replica
# that the cluster promotes by itself when its master fails (no proxy, no
# REPLICAOF by hand), with the node settings of redis-cluster-node.conf,
# which the tests' private clusters read too.
cluster_dir=$STACK_DIR/redis-cluster

cluster_ports() { seq "$REDIS_CLUSTER_PORT" $((REDIS_CLUSTER_PORT + REDIS_CLUSTER_NODES - 1)); }
cluster_seeds() { cluster_ports | sed 's/^/127.0.0.1:/' | paste -sd, -; }
cluster_pid() { echo "$cluster_dir/$1/redis.pid"; }
cluster_conf() { echo "$cluster_dir/$1/redis.conf"; }
# What a cluster node's process title keeps of it: redis-server replaces
# its command line with "redis-server 127.0.0.1:PORT [cluster]", dropping
# the config file's path.
cluster_title() { echo "127.0.0.1:$1 [cluster]"; }

redis_cluster_node_up() {
  local port=$1 dir=$cluster_dir/$1
  mkdir -p "$dir" "$logs_dir"
  cat > "$(cluster_conf "$port")" <<EOF
bind 127.0.0.1
port $port
protected-mode yes
daemonize yes
pidfile $(cluster_pid "$port")
logfile $logs_dir/redis-cluster-$port.log
dir $dir
include $here/redis-cluster-node.conf
appendfsync everysec
save ""
maxmemory 128mb
maxmemory-policy noeviction
EOF
  pid_alive "$(cluster_pid "$port")" "$(cluster_title "$port")" && return
  redis-server "$(cluster_conf "$port")" || die "redis-server :$port did not start; see $logs_dir/redis-cluster-$port.log"
  wait_for "redis cluster node 127.0.0.1:$port" 30 bash -c "[ \"\$(redis-cli -h 127.0.0.1 -p $port ping)\" = PONG ]" \
    || die "redis cluster node :$port did not answer PING; see $logs_dir/redis-cluster-$port.log"
}

cluster_ok() {
  local port
  for port in $(cluster_ports); do
    redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
}

# Every replica is linked to its master, so a failover has a copy to promote.
cluster_replicas_linked() {
  local port info n=0
  for port in $(cluster_ports); do
    info=$(redis-cli -h 127.0.0.1 -p "$port" info replication 2>/dev/null) || return 1
    if grep -q '^role:slave' <<<"$info"; then
      grep -q '^master_link_status:up' <<<"$info" || return 1
      n=$((n + 1))
    fi
  done
  [ "$n" -ge 3 ]
}

redis_cluster_up() {
  local port known
  for port in $(cluster_ports); do
    redis_cluster_node_up "$port"
  done
  known=$(redis-cli -h 127.0.0.1 -p "$REDIS_CLUSTER_PORT" cluster info | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p')
  if [ "${known:-1}" = 1 ]; then
    say "creating the Redis Cluster (3 masters, 3 replicas)"
    # shellcheck disable=SC2046
    redis-cli --cluster create $(cluster_ports | sed 's/^/127.0.0.1:/') --cluster-replicas 1 --cluster-yes \
      >"$logs_dir/redis-cluster-create.log" 2>&1 || die "redis-cli --cluster create failed; see $logs_dir/redis-cluster-create.log"
  fi
  wait_for "redis cluster (cluster_state:ok on every node)" 60 cluster_ok \
    || die "the Redis Cluster is not ok after 60 s; see $logs_dir/redis-cluster-*.log"
  wait_for "redis cluster (every replica linked to its master)" 60 cluster_replicas_linked \
    || die "the Redis Cluster's replicas are not all linked after 60 s; see $logs_dir/redis-cluster-*.log"
}

# All six at once: each takes about 2 s to write its AOF and leave.
redis_cluster_down() {
  local port pids=()
  for port in $(cluster_ports); do
    if pid_alive "$(cluster_pid "$port")" "$(cluster_title "$port")"; then
      stop_pid "redis cluster node :$port" "$(cluster_pid "$port")" "$(cluster_title "$port")" &
      pids+=($!)
    fi
  done
  wait_all "${pids[@]}"
}

redis_cluster_status() {
  local port role
  for port in $(cluster_ports); do
    if pid_alive "$(cluster_pid "$port")" "$(cluster_title "$port")"; then
      role=$(redis-cli -h 127.0.0.1 -p "$port" role 2>/dev/null | head -1)
      printf '%-8s running  pid %-7s %s:%s (cluster %s)\n' "rcluster" "$(cat "$(cluster_pid "$port")")" 127.0.0.1 "$port" "${role:-?}"
    fi
  done
}

# --- MariaDB ---------------------------------------------------------------

mysql_dir=$STACK_DIR/mariadb
mysql_cnf=$mysql_dir/my.cnf
mysql_pid=$mysql_dir/mariadb.pid
mysql_sock=$mysql_dir/mariadb.sock

mysql_root() { mariadb --no-defaults --protocol=socket -S "$mysql_sock" -uroot "$@"; }

mariadb_up() {
  mkdir -p "$mysql_dir/binlog" "$logs_dir"
  cat > "$mysql_cnf" <<EOF
[mysqld]
user=root
datadir=$mysql_dir/data
socket=$mysql_sock
pid-file=$mysql_pid
port=$MYSQL_PORT
bind-address=127.0.0.1
log-error=$logs_dir/mariadb.log
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
max_connections=500
innodb_buffer_pool_size=128M
# What the binlog follower (cmd/cache-invalidator) needs.
server_id=1
log_bin=$mysql_dir/binlog/mysql-bin
binlog_format=ROW
binlog_row_image=FULL
expire_logs_days=2
# A committed order survives a power loss: the redo log and the binlog are
# fsynced at every commit (the order-writer commits once per batch, and
# group commit shares the fsync between concurrent ones).
innodb_flush_log_at_trx_commit=1
sync_binlog=1
EOF
  if [ ! -d "$mysql_dir/data/mysql" ]; then
    say "initialising MariaDB data dir $mysql_dir/data"
    mariadb-install-db --defaults-file="$mysql_cnf" --auth-root-authentication-method=socket \
      --skip-test-db > "$logs_dir/mariadb-install.log" 2>&1 \
      || die "mariadb-install-db failed; see $logs_dir/mariadb-install.log"
  fi
  if pid_alive "$mysql_pid" "$mysql_cnf"; then
    say "mariadb already running (pid $(cat "$mysql_pid"))"
  else
    # mariadbd writes its own pid file; setsid detaches it from this shell.
    setsid mariadbd --defaults-file="$mysql_cnf" > /dev/null 2>&1 < /dev/null &
  fi
  wait_for "mariadb socket" 60 mysql_root -e 'SELECT 1' \
    || die "mariadb did not answer on $mysql_sock; see $logs_dir/mariadb.log"
  mysql_root <<EOF || die "could not create the MariaDB users"
CREATE DATABASE IF NOT EXISTS \`$MYSQL_DATABASE\` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE USER IF NOT EXISTS '$MYSQL_APP_USER'@'127.0.0.1' IDENTIFIED BY '$MYSQL_APP_PASSWORD';
CREATE USER IF NOT EXISTS '$MYSQL_APP_USER'@'localhost' IDENTIFIED BY '$MYSQL_APP_PASSWORD';
GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_APP_USER'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_APP_USER'@'localhost';
CREATE USER IF NOT EXISTS '$MYSQL_CANAL_USER'@'127.0.0.1' IDENTIFIED BY '$MYSQL_CANAL_PASSWORD';
GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '$MYSQL_CANAL_USER'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF
  wait_for "mariadb 127.0.0.1:$MYSQL_PORT" 30 \
    mariadb --no-defaults -h127.0.0.1 -P"$MYSQL_PORT" -u"$MYSQL_APP_USER" -p"$MYSQL_APP_PASSWORD" -e 'SELECT 1' \
    || die "mariadb did not answer a query on 127.0.0.1:$MYSQL_PORT"
}


# --- MariaDB Galera cluster ------------------------------------------------

# Three MariaDB nodes in one Galera cluster as production runs MySQL (up
# --mysql-cluster, or SECKILL_MYSQL_TOPOLOGY=cluster), beside the single
# server: every commit is certified by the three before it returns, so any
# node can take the writes when another dies and none of them has lost an
# acknowledged row. HAProxy sends every connection to one node at a time
# (the others are backups), chosen by the node's own state: Synced
# (wsrep_local_state 4) in a Primary component, not a port that accepts.
# Each node writes a row binlog of every transaction, its own and the
# cluster's (log_slave_updates), under the cluster's GTIDs
# (wsrep_gtid_mode, one domain, one server_id), so the binlog follower
# resumes on any node from the GTID set it saved. docs/mysql-cluster.md.
MYSQL_CLUSTER_NODES=3
mcluster_dir=$STACK_DIR/mariadb-cluster
mcluster_port() { echo $((MYSQL_CLUSTER_PORT + $1)); }
mcluster_gcomm_port() { echo $((MYSQL_CLUSTER_GCOMM_PORT + 10 * ($1 - 1))); }
mcluster_cnf() { echo "$mcluster_dir/$1/my.cnf"; }
mcluster_pid() { echo "$mcluster_dir/$1/mariadb.pid"; }
mcluster_sock() { echo "$mcluster_dir/$1/mariadb.sock"; }
mcluster_root() { local n=$1; shift; mariadb --no-defaults --protocol=socket -S "$(mcluster_sock "$n")" -uroot "$@"; }
mcluster_proxy_cfg=$mcluster_dir/haproxy.cfg
mcluster_proxy_pid=$mcluster_dir/haproxy.pid
mcluster_proxy_sock=$mcluster_dir/haproxy.sock
mcluster_addresses() {
  local n out=()
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do out+=("127.0.0.1:$(mcluster_gcomm_port "$n")"); done
  (IFS=,; echo "${out[*]}")
}

# galera_provider_options: the provider options every node shares, from
# galera-node.cnf; a node's own line puts its addresses before them.
galera_provider_options() {
  sed -n 's/^wsrep_provider_options="\(.*\)"$/\1/p' "$here/galera-node.cnf"
}

# A node's file: the settings every node has (galera-node.cnf, which the
# compose file's galera profile mounts too), then the node's own.
mcluster_node_config() {
  local n=$1 dir=$mcluster_dir/$1 gcomm shared
  gcomm=$(mcluster_gcomm_port "$n")
  shared=$(galera_provider_options)
  [ -n "$shared" ] || die "no wsrep_provider_options in $here/galera-node.cnf"
  mkdir -p "$dir/binlog" "$logs_dir"
  cat > "$(mcluster_cnf "$n")" <<EOF
!include $here/galera-node.cnf

[mysqld]
user=root
datadir=$dir/data
socket=$(mcluster_sock "$n")
pid-file=$(mcluster_pid "$n")
port=$(mcluster_port "$n")
bind-address=127.0.0.1
log-error=$logs_dir/mariadb-cluster-$n.log
log_bin=$dir/binlog/mysql-bin
gtid_domain_id=$((100 + n))
wsrep_cluster_address=gcomm://$(mcluster_addresses)
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1:$gcomm
wsrep_node_incoming_address=127.0.0.1:$(mcluster_port "$n")
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$gcomm;ist.recv_addr=127.0.0.1:$((gcomm + 1));$shared"
wsrep_sst_receive_address=127.0.0.1:$((gcomm + 2))
EOF
  if [ ! -d "$dir/data/mysql" ]; then
    mariadb-install-db --defaults-file="$(mcluster_cnf "$n")" --auth-root-authentication-method=socket \
      --skip-test-db > "$logs_dir/mariadb-cluster-install-$n.log" 2>&1 \
      || die "mariadb-install-db of node $n failed; see $logs_dir/mariadb-cluster-install-$n.log"
  fi
}

mcluster_running() { pid_alive "$(mcluster_pid "$1")" "$(mcluster_cnf "$1")"; }

# The node answers and is Synced in a Primary component.
mcluster_synced() {
  [ "$(mcluster_root "$1" -N -e "SELECT CONCAT(
      (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_local_state'), '/',
      (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_status'))" 2>/dev/null)" = 4/Primary ]
}

# mcluster_launch N [ARGS]: starts node N, from the position
# mcluster_recover found for it (kept: until the node answers, it is what
# the node holds). Its pid is recorded at once (mariadbd writes the file
# itself only once it has joined, and a node waiting for a Primary
# component must be seen by status and down too).
mcluster_launch() {
  local n=$1 recovered=$mcluster_dir/$1/recovered-position a; shift
  # A snapshot's method is the joiner's: galera-check.sh keeps a donor in
  # rotation on the donor's own setting, true only while every node has
  # galera-node.cnf's.
  for a in "$@"; do
    case $a in --wsrep[-_]sst[-_]method*) die "mariadb cluster node $n: the snapshot method is galera-node.cnf's, the same on every node" ;; esac
  done
  if [ -s "$recovered" ]; then set -- "$@" --wsrep-start-position="$(cat "$recovered")"; fi
  setsid mariadbd --defaults-file="$(mcluster_cnf "$n")" "$@" > /dev/null 2>&1 < /dev/null &
  echo $! > "$(mcluster_pid "$n")"
}

# The position a node that was killed had reached, recovered from its own
# InnoDB log (what Debian's galera_recovery does before a service start)
# into recovered-position: given to the node, it asks the donor for the
# transactions it missed (IST, a second) instead of a whole snapshot. A
# node stopped cleanly has its position in grastate.dat already.
mcluster_recover() {
  local n=$1 log=$mcluster_dir/$1/wsrep-recover.log recovered=$mcluster_dir/$1/recovered-position
  rm -f "$recovered"
  grep -qs '^seqno: *-1' "$mcluster_dir/$n/data/grastate.dat" || return 0
  # Emptied first: the server appends, and an earlier kill's position
  # would replay what the node already has.
  : > "$log"
  mariadbd --defaults-file="$(mcluster_cnf "$n")" --wsrep-recover --log-error="$log" > /dev/null 2>&1 < /dev/null || true
  # The whole of it, the GTID after the seqno too: given the seqno
  # alone, the node logs what IST brings under GTID domain 0.
  sed -n 's/.*WSREP: Recovered position: *\([^ ]*\).*/\1/p' "$log" | tail -n 1 > "$recovered" || true
  if [ ! -s "$recovered" ]; then
    rm -f "$recovered"
    say "could not recover the position of mariadb cluster node $n (see $log): it will ask for a whole snapshot, and no node is taken for ahead of it" >&2
  fi
}

# The last transaction a node committed: asked when it answers,
# otherwise from its recovered position or grastate.dat; "?" when a
# stopped node that was killed has none of them (its recovery failed), -1
# when it never ran.
mcluster_seqno() {
  local n=$1 seqno=""
  if mcluster_running "$n"; then
    seqno=$(mcluster_root "$n" -N -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_last_committed'" 2>/dev/null || true)
  fi
  if [ -z "$seqno" ] && [ -s "$mcluster_dir/$n/recovered-position" ]; then
    seqno=$(sed -n 's/^[^:]*:\(-\{0,1\}[0-9]*\).*/\1/p' "$mcluster_dir/$n/recovered-position")
  fi
  if [ -z "$seqno" ]; then
    seqno=$(sed -n 's/^seqno: *\(-\{0,1\}[0-9]*\).*/\1/p' "$mcluster_dir/$n/data/grastate.dat" 2>/dev/null || true)
  fi
  if [ "${seqno:--1}" = -1 ] && grep -qs '^seqno: *-1' "$mcluster_dir/$n/data/grastate.dat" && ! mcluster_running "$n"; then
    seqno="?"
  fi
  echo "${seqno:--1}"
}

# The node that holds the most, among every node's (running or not), and
# its seqno: "node seqno", or nothing when a node's position is unknown.
# Of nodes that hold as much, a running one: after a loss of quorum the
# survivor commits nothing more, so its seqno ties with those of the
# nodes that died, and bootstrapping it is what keeps one history.
mcluster_most_advanced() {
  local n seqno best="" best_seqno=-1 best_running=no running
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    seqno=$(mcluster_seqno "$n")
    [ "$seqno" = "?" ] && return 0
    running=no
    if mcluster_running "$n"; then running=yes; fi
    if [ "$seqno" -gt "$best_seqno" ] || { [ "$seqno" = "$best_seqno" ] && [ "$running" = yes ] && [ "$best_running" = no ]; }; then
      best=$n best_seqno=$seqno best_running=$running
    fi
  done
  [ -n "$best" ] && echo "$best $best_seqno"
  return 0
}

mcluster_wait() {
  wait_for "mariadb cluster node $1 (Synced, Primary)" "$2" mcluster_synced "$1"
}

# Some running node is in a Primary component (Synced or not: a donor
# and a joiner in a long snapshot are, too).
mcluster_primary_somewhere() {
  local n
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    mcluster_running "$n" || continue
    [ "$(mcluster_root "$n" -N -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_status'" 2>/dev/null)" = Primary ] && return 0
  done
  return 1
}

# After two nodes of three died, the survivor is a minority and stays out
# of a Primary component. Galera could re-form the last one by itself once
# every member returns (pc.recovery), but the members that come back that
# way log what they apply under GTID domain 0 (MariaDB 10.11): the nodes'
# binlogs fork, and a binlog follower's position on one names nothing on
# the others. So pc.recovery is off and the stack bootstraps exactly one
# node, as an operator does: the most advanced, a running one first
# (pc.bootstrap); when a stopped node holds more, the running ones are
# stopped and that node starts a new cluster. The others join it by IST.
mcluster_bootstrap_most_advanced() {
  local best n seqno other
  best=$(mcluster_most_advanced)
  [ -n "$best" ] || die "no node of the MariaDB cluster is in a Primary component, and the position of one is unknown: find the most advanced node (mariadbd --wsrep-recover), bootstrap it (SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'), start the others"
  n=${best% *} seqno=${best#* }
  if mcluster_running "$n"; then
    mcluster_root "$n" -e "SELECT 1" > /dev/null 2>&1 \
      || die "no node of the MariaDB cluster is in a Primary component, and node $n, the most advanced (seqno $seqno), does not answer: bootstrapping another would discard its commits; see $logs_dir/mariadb-cluster-$n.log"
    say "no node of the MariaDB cluster is in a Primary component: making node $n (the most advanced, seqno $seqno) a new one (pc.bootstrap)"
    mcluster_root "$n" -e "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'" \
      || die "could not bootstrap node $n; see $logs_dir/mariadb-cluster-$n.log"
    return
  fi
  say "no node of the MariaDB cluster is in a Primary component, and node $n, stopped, holds the most (seqno $seqno): stopping the running ones, starting a new cluster from node $n"
  for other in $(seq 1 $MYSQL_CLUSTER_NODES); do
    if mcluster_running "$other"; then mcluster_node_down "$other"; mcluster_recover "$other"; fi
  done
  sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$mcluster_dir/$n/data/grastate.dat"
  mcluster_launch "$n" --wsrep-new-cluster
  mcluster_wait "$n" 180 || die "mariadb cluster node $n did not bootstrap; see $logs_dir/mariadb-cluster-$n.log"
}

# The GTID domains in node N's binlog other than the cluster's
# (wsrep_gtid_domain_id): a node that logged under another one forked
# from the others' history.
mcluster_foreign_domains() {
  mcluster_root "$1" -N -e "SELECT @@gtid_binlog_pos, @@wsrep_gtid_domain_id" 2>/dev/null \
    | awk -F'\t' '{ n = split($1, g, ","); for (i = 1; i <= n; i++) { split(g[i], f, "-"); if (f[1] != $2) printf "%s ", g[i] } }'
}

# A node whose binlog forked (above: an earlier stack's recovery) is not
# served: it is stopped, its state and binlog dropped, and it joins again
# by a whole snapshot from a donor, which brings the cluster's history.
mcluster_rebuild_forked() {
  local n foreign forked=() donor=""
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    foreign=$(mcluster_foreign_domains "$n") || die "could not read the binlog position of mariadb cluster node $n"
    if [ -n "$foreign" ]; then forked+=("$n:$foreign"); elif [ -z "$donor" ]; then donor=$n; fi
  done
  [ ${#forked[@]} -gt 0 ] || return 0
  # The snapshot brings its donor's history: a node that did not fork.
  [ -n "$donor" ] || die "every node of the MariaDB cluster logged transactions under another GTID domain than the cluster's (${forked[*]}): rebuild the cluster from the most advanced node by hand"
  for n in "${forked[@]}"; do
    foreign=${n#*:} n=${n%%:*}
    say "mariadb cluster node $n logged transactions under another GTID domain than the cluster's ($foreign): rebuilding it from a snapshot of node $donor (SST)"
    mcluster_rebuild "$n" "$donor"
  done
}

# mcluster_rebuild N [DONOR]: node N stopped, its Galera state and binlog
# dropped, and joined again by a whole snapshot (SST), from node DONOR
# when one is named, then checked to log the cluster's history only.
mcluster_rebuild() {
  local n=$1 donor=${2:-} foreign m other=
  [ -z "$donor" ] || mcluster_synced "$donor" || die "rebuild: the donor, mariadb cluster node $donor, is not Synced in a Primary component"
  for m in $(seq 1 $MYSQL_CLUSTER_NODES); do
    [ "$m" != "$n" ] && mcluster_synced "$m" && other=$m && break
  done
  # Its state dropped, a node with no Synced peer would bootstrap a new,
  # empty cluster of its own.
  [ -n "$other" ] || die "rebuild: no other mariadb cluster node is Synced in a Primary component to give node $n a snapshot"
  mcluster_node_down "$n"
  rm -f "$mcluster_dir/$n/data/grastate.dat" "$mcluster_dir/$n/data/galera.cache" "$mcluster_dir/$n/recovered-position" "$mcluster_dir/$n/binlog/"*
  mcluster_launch "$n" ${donor:+--wsrep-sst-donor="node$donor"}
  mcluster_wait "$n" 180 || die "mariadb cluster node $n did not rejoin by a snapshot; see $logs_dir/mariadb-cluster-$n.log"
  foreign=$(mcluster_foreign_domains "$n") || die "could not read the binlog position of mariadb cluster node $n"
  [ -z "$foreign" ] || die "mariadb cluster node $n still logs under another GTID domain after its snapshot ($foreign); see $logs_dir/mariadb-cluster-$n.log"
  say "mariadb cluster node $n rebuilt from a snapshot${donor:+ of node $donor}"
}

# The node a cluster with none running starts from: the one Galera marked
# safe to bootstrap (the last to leave). After a crash of every node none
# is: this development stack takes the most advanced by the positions
# they recovered, node 1 when one is unknown, saying so.
mcluster_bootstrap_node() {
  local n
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    if grep -qs '^safe_to_bootstrap: 1' "$mcluster_dir/$n/data/grastate.dat"; then echo "$n"; return; fi
  done
  if [ -f "$mcluster_dir/1/data/grastate.dat" ]; then
    local best
    best=$(mcluster_most_advanced)
    n=${best%% *}
    if [ -n "$best" ]; then
      say "no node of the MariaDB cluster is marked safe to bootstrap (all were killed): bootstrapping from node $n, the most advanced (seqno ${best#* })" >&2
    else
      n=1
      say "no node of the MariaDB cluster is marked safe to bootstrap (all were killed) and a node's position is unknown: bootstrapping from node 1, which may lack the others' last commits" >&2
    fi
    sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$mcluster_dir/$n/data/grastate.dat"
    echo "$n"
    return
  fi
  echo 1
}

mariadb_cluster_up() {
  local n first="" any=no
  # One node after another: mariadb-install-db run side by side failed
  # now and then (a bootstrap's temporary table gone, Errcode 2).
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    mcluster_node_config "$n"
    if mcluster_running "$n"; then any=yes; else mcluster_recover "$n"; fi
  done
  if [ "$any" = no ]; then
    first=$(mcluster_bootstrap_node)
    say "bootstrapping the MariaDB cluster from node $first"
    mcluster_launch "$first" --wsrep-new-cluster
    mcluster_wait "$first" 180 \
      || die "mariadb cluster node $first did not bootstrap; see $logs_dir/mariadb-cluster-$first.log"
    mcluster_root "$first" < "$here/galera-users.sql" || die "could not create the MariaDB cluster's users (galera-users.sql)"
  fi
  if [ "$any" = yes ] && ! mcluster_primary_somewhere; then
    mcluster_bootstrap_most_advanced
    wait_for "a Primary component in the MariaDB cluster" 30 mcluster_primary_somewhere \
      || die "the MariaDB cluster has no Primary component after a bootstrap; see $logs_dir/mariadb-cluster-*.log"
  fi
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    if ! mcluster_running "$n"; then mcluster_launch "$n"; fi
  done
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    mcluster_wait "$n" 180 \
      || die "mariadb cluster node $n is not Synced in a Primary component; see $logs_dir/mariadb-cluster-$n.log"
  done
  mcluster_rebuild_forked
  mcluster_proxy_up
}

# sed_value is $1 as a sed replacement between | delimiters: a path may
# hold | & or \.
sed_value() { printf '%s' "$1" | sed -e 's/[|&\\]/\\&/g'; }

# HAProxy in front, with galera-haproxy.cfg's settings (which say why
# they are what they are), the stack's values put in for its names.
mcluster_proxy_up() {
  [ "$MYSQL_CLUSTER_NODES" = 3 ] || die "galera-haproxy.cfg names three nodes, not $MYSQL_CLUSTER_NODES"
  sed -e "s|\${GALERA_PROXY_SOCKET}|$(sed_value "$mcluster_proxy_sock")|g" \
    -e "s|\${GALERA_PROXY_PORT}|$MYSQL_CLUSTER_PORT|g" \
    -e "s|\${GALERA_CHECK}|$(sed_value "$here/galera-check.sh")|g" \
    -e "s|\${GALERA_NODE1_PORT}|$(mcluster_port 1)|g" \
    -e "s|\${GALERA_NODE2_PORT}|$(mcluster_port 2)|g" \
    -e "s|\${GALERA_NODE3_PORT}|$(mcluster_port 3)|g" \
    "$here/galera-haproxy.cfg" > "$mcluster_proxy_cfg.new"
  if grep -q '\${[A-Z0-9_]*}' "$mcluster_proxy_cfg.new"; then
    die "galera-haproxy.cfg names a value stack.sh does not put in: $(grep -o '\${[A-Z0-9_]*}' "$mcluster_proxy_cfg.new" | sort -u | paste -sd' ')"
  fi
  # Reloaded only when its configuration changed: a reload leaves the old
  # worker serving its connections until they close.
  if pid_alive "$mcluster_proxy_pid" "$mcluster_proxy_cfg"; then
    if ! cmp -s "$mcluster_proxy_cfg.new" "$mcluster_proxy_cfg"; then
      mv "$mcluster_proxy_cfg.new" "$mcluster_proxy_cfg"
      kill -USR2 "$(cat "$mcluster_proxy_pid")" 2>/dev/null || true
    fi
    rm -f "$mcluster_proxy_cfg.new"
  else
    mv "$mcluster_proxy_cfg.new" "$mcluster_proxy_cfg"
    haproxy -W -D -p "$mcluster_proxy_pid" -f "$mcluster_proxy_cfg" 2>>"$logs_dir/mariadb-cluster-haproxy.log" \
      || die "HAProxy in front of the MariaDB cluster did not start; see $logs_dir/mariadb-cluster-haproxy.log"
  fi
  wait_for "mariadb cluster through HAProxy 127.0.0.1:$MYSQL_CLUSTER_PORT" 30 \
    mariadb --no-defaults -h127.0.0.1 -P"$MYSQL_CLUSTER_PORT" -u"$MYSQL_APP_USER" -p"$MYSQL_APP_PASSWORD" -e 'SELECT 1' \
    || die "the MariaDB cluster did not answer through HAProxy on 127.0.0.1:$MYSQL_CLUSTER_PORT"
  # A node that rejoined takes the connections only once HAProxy's checks
  # see it Synced, and node 1 then cuts the backup's sessions: the cluster
  # is up when that has happened, not seconds later under a client.
  wait_for "HAProxy sending to every node of the MariaDB cluster" 30 mcluster_proxy_sees_all \
    || die "HAProxy on 127.0.0.1:$MYSQL_CLUSTER_PORT does not see every node of the MariaDB cluster up; see $logs_dir/mariadb-cluster-haproxy.log"
}

# Every node HAProxy checks is up in its view (operational state 2 in
# "show servers state": name in column 4, state in column 6).
mcluster_proxy_sees_all() {
  local up
  up=$(echo "show servers state mysql" | socat -t 2 - "UNIX-CONNECT:$mcluster_proxy_sock" 2>/dev/null \
    | awk '$4 ~ /^node[0-9]+$/ && $6 == 2 { n++ } END { print n + 0 }')
  [ "$up" = "$MYSQL_CLUSTER_NODES" ]
}

# Node 1 last, so that node 1 is the one Galera marks safe to bootstrap
# the next start from.
mariadb_cluster_down() {
  local n pids=()
  if pid_alive "$mcluster_proxy_pid" "$mcluster_proxy_cfg"; then
    stop_pid "haproxy (mariadb cluster)" "$mcluster_proxy_pid" "$mcluster_proxy_cfg"
  fi
  for n in $(seq $MYSQL_CLUSTER_NODES -1 2); do
    mcluster_node_down "$n" &
    pids+=($!)
  done
  wait_all "${pids[@]}"
  mcluster_node_down 1
}

mcluster_node_down() {
  if mcluster_running "$1"; then
    stop_pid "mariadb cluster node $1" "$(mcluster_pid "$1")" "$(mcluster_cnf "$1")"
  else
    rm -f "$(mcluster_pid "$1")"
  fi
}

mariadb_cluster_status() {
  local n state
  for n in $(seq 1 $MYSQL_CLUSTER_NODES); do
    if mcluster_running "$n"; then
      state=$(mcluster_root "$n" -N -e "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME SEPARATOR ' ') FROM information_schema.GLOBAL_STATUS
        WHERE VARIABLE_NAME IN ('wsrep_cluster_size', 'wsrep_cluster_status', 'wsrep_local_state_comment')" 2>/dev/null || echo "not answering")
      printf '%-8s running  pid %-7s 127.0.0.1:%s (mariadb cluster node %s: size, status, state %s)\n' "mcluster" \
        "$(cat "$(mcluster_pid "$n")")" "$(mcluster_port "$n")" "$n" "$state"
    fi
  done
  if pid_alive "$mcluster_proxy_pid" "$mcluster_proxy_cfg"; then
    printf '%-8s running  pid %-7s 127.0.0.1:%s (haproxy in front of the mariadb cluster)\n' "mproxy" \
      "$(cat "$mcluster_proxy_pid")" "$MYSQL_CLUSTER_PORT"
  fi
}

# --- Kafka -----------------------------------------------------------------

kafka_dir=$STACK_DIR/kafka
kafka_props=$kafka_dir/server.properties
kafka_pid=$kafka_dir/kafka.pid

kafka_java() {
  java -Xms64m -Xmx256m -Dlog4j.configuration="file:$kafka_dir/tools-log4j.properties" \
    -cp "$kafka_libs/*" "$@"
}

# kafka_config FILE NODE_ID VOTERS PORT CONTROLLER_PORT DATA_DIR REPLICAS MIN_ISR:
# a KRaft node that is both broker and controller, its topics (the internal
# ones too) replicated REPLICAS times with MIN_ISR in sync.
kafka_config() {
  local file=$1 id=$2 voters=$3 port=$4 cport=$5 data=$6 replicas=$7 min_isr=$8
  cat > "$file" <<EOF
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data
num.partitions=1
default.replication.factor=$replicas
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$replicas
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
log.retention.hours=72
EOF
}

# kafka_start PID_FILE PROPS LOG4J OUT HEAP: a Kafka node in the background.
kafka_start() {
  setsid java -Xms"$5" -Xmx"$5" -XX:+UseG1GC -Djava.awt.headless=true -Dlog4j.configuration="file:$3" \
    -cp "$kafka_libs/*" kafka.Kafka "$2" > "$4" 2>&1 < /dev/null &
  echo $! > "$1"
}

# kafka_logging: the brokers' and the tools' log settings, which the
# cluster's nodes take theirs from.
kafka_logging() {
  mkdir -p "$kafka_dir" "$logs_dir"
  cat > "$kafka_dir/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$logs_dir/kafka.log
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.controller=INFO
log4j.logger.state.change.logger=WARN
EOF
  cat > "$kafka_dir/tools-log4j.properties" <<EOF
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
}

kafka_up() {
  mkdir -p "$kafka_dir/data" "$logs_dir"
  kafka_config "$kafka_props" 1 "1@127.0.0.1:$KAFKA_CONTROLLER_PORT" "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$kafka_dir/data" 1 1
  if [ ! -f "$kafka_dir/data/meta.properties" ]; then
    local cluster_id
    cluster_id=$(kafka_probe --uuid) || die "could not make a Kafka cluster id"
    say "formatting Kafka storage (cluster $cluster_id)"
    kafka_java kafka.tools.StorageTool format -t "$cluster_id" -c "$kafka_props" > "$logs_dir/kafka-format.log" 2>&1 \
      || die "StorageTool format failed; see $logs_dir/kafka-format.log"
  fi
  if pid_alive "$kafka_pid" "$kafka_props"; then
    say "kafka already running (pid $(cat "$kafka_pid"))"
  else
    kafka_start "$kafka_pid" "$kafka_props" "$kafka_dir/log4j.properties" "$logs_dir/kafka.out" "$KAFKA_HEAP"
  fi
  wait_for "kafka 127.0.0.1:$KAFKA_PORT (metadata)" 90 kafka_probe "127.0.0.1:$KAFKA_PORT" \
    || die "kafka did not answer a metadata request on 127.0.0.1:$KAFKA_PORT; see $logs_dir/kafka.log and kafka.out"
  kafka_create_topics "127.0.0.1:$KAFKA_PORT" 1 ""
}

# kafka_create_topics BROKER REPLICAS MIN_ISR: the project's topics not
# there yet, in one request (kafka-probe.py: a JVM's tool cost one or two
# seconds a topic).
kafka_create_topics() {
  local broker=$1 replicas=$2 min_isr=$3 existing t name parts specs=() made=()
  existing=$(kafka_probe "$broker" --topics) || die "could not list the topics of $broker"
  for t in "${TOPICS[@]}"; do
    name=${t%%:*} parts=${t##*:}
    if ! grep -qx "$name" <<<"$existing"; then
      specs+=("$name:$parts:$replicas${min_isr:+:$min_isr}")
      made+=("$name ($parts partitions)")
    fi
  done
  [ ${#specs[@]} -gt 0 ] || return 0
  kafka_probe "$broker" --create "${specs[@]}" || die "could not create the topics on $broker"
  say "created on $broker, replication factor $replicas${min_isr:+, min.insync.replicas $min_isr}: $(IFS=,; echo "${made[*]}")"
}

# kafka_probe HOST:PORT [--brokers N | --topics]: one metadata request,
# without a JVM's start (kafka-probe.py).
kafka_probe() { python3 "$here/kafka-probe.py" "$@"; }


# --- Kafka cluster ---------------------------------------------------------

# Three Kafka nodes as production runs them (up --kafka-brokers 3, or
# SECKILL_KAFKA_TOPOLOGY=cluster), beside the single broker: each node both
# broker and controller, a static quorum of the three. Combined nodes keep
# it at three JVMs on this 2-core machine (three controllers apart would
# double them) and still survive one node's loss: two voters of three keep
# the quorum, two replicas of three keep min.insync.replicas=2. 384 MB of
# heap each: the single broker runs in 512 MB, and a node here carries a
# third of the leaders.
KAFKA_CLUSTER_NODES=3
kcluster_dir=$STACK_DIR/kafka-cluster

kcluster_port() { echo $((KAFKA_CLUSTER_PORT + 100 * ($1 - 1))); }
kcluster_controller_port() { echo $(($(kcluster_port "$1") + 1)); }
kcluster_props() { echo "$kcluster_dir/$1/server.properties"; }
kcluster_pid() { echo "$kcluster_dir/$1/kafka.pid"; }
kcluster_seeds() {
  local n out=()
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do out+=("127.0.0.1:$(kcluster_port "$n")"); done
  (IFS=,; echo "${out[*]}")
}
kcluster_voters() {
  local n out=()
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do out+=("$n@127.0.0.1:$(kcluster_controller_port "$n")"); done
  (IFS=,; echo "${out[*]}")
}

kcluster_node_config() {
  local n=$1 dir=$kcluster_dir/$1
  mkdir -p "$dir/data" "$logs_dir"
  kafka_config "$(kcluster_props "$n")" "$n" "$(kcluster_voters)" "$(kcluster_port "$n")" "$(kcluster_controller_port "$n")" "$dir/data" 3 2
  # A dead node is fenced (its leaderships moved, it leaves every ISR) 3 s
  # after its last heartbeat instead of Kafka's 9 s: until then the
  # partitions it led take no write, and the API cannot tell from the
  # metadata that fewer than min.insync.replicas remain. A follower that
  # stops fetching leaves the ISR after 10 s (default 30 s). A node that
  # comes back takes its preferred leaderships back within 10 s (default
  # 300 s), so the load spreads again.
  cat >> "$(kcluster_props "$n")" <<EOF
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
replica.lag.time.max.ms=10000
leader.imbalance.check.interval.seconds=10
EOF
  sed -e "s|$logs_dir/kafka.log|$logs_dir/kafka-cluster-$n.log|" "$kafka_dir/log4j.properties" > "$dir/log4j.properties"
}

kafka_cluster_up() {
  local n cluster_id=""
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    kcluster_node_config "$n"
    if [ -f "$kcluster_dir/$n/data/meta.properties" ]; then
      cluster_id=$(sed -n 's/^cluster.id=//p' "$kcluster_dir/$n/data/meta.properties")
    fi
  done
  if [ -z "$cluster_id" ]; then
    cluster_id=$(kafka_probe --uuid) || die "could not make a Kafka cluster id"
    say "formatting the Kafka cluster's storage (cluster $cluster_id, $KAFKA_CLUSTER_NODES nodes)"
  fi
  # The nodes' formats side by side: each is a JVM's start.
  local pids=()
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    if [ ! -f "$kcluster_dir/$n/data/meta.properties" ]; then
      { kafka_java kafka.tools.StorageTool format -t "$cluster_id" -c "$(kcluster_props "$n")" > "$logs_dir/kafka-cluster-format-$n.log" 2>&1 \
        || die "StorageTool format of node $n failed; see $logs_dir/kafka-cluster-format-$n.log"; } &
      pids+=($!)
    fi
  done
  wait_all "${pids[@]}" || die "the Kafka cluster's storage is not formatted"
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    if ! pid_alive "$(kcluster_pid "$n")" "$(kcluster_props "$n")"; then
      kafka_start "$(kcluster_pid "$n")" "$(kcluster_props "$n")" "$kcluster_dir/$n/log4j.properties" "$logs_dir/kafka-cluster-$n.out" "$KAFKA_CLUSTER_HEAP"
    fi
  done
  wait_for "kafka cluster $(kcluster_seeds) (metadata)" 120 kcluster_all_registered \
    || die "the Kafka cluster's three brokers did not all register; see $logs_dir/kafka-cluster-*.log"
  kafka_create_topics "127.0.0.1:$(kcluster_port 1)" 3 2
}

# Every broker answers and the cluster's metadata lists all three.
kcluster_all_registered() {
  local n
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    pid_alive "$(kcluster_pid "$n")" "$(kcluster_props "$n")" || return 1
  done
  # Asked of every node: a restarted node answers from the metadata it
  # had on disk before the others have unfenced it; each must list all.
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    kafka_probe "127.0.0.1:$(kcluster_port "$n")" --brokers "$KAFKA_CLUSTER_NODES" || return 1
  done
}

kcluster_topics() {
  timeout 30 java -Xms32m -Xmx128m -XX:TieredStopAtLevel=1 -Dlog4j.configuration="file:$kafka_dir/tools-log4j.properties" \
    -cp "$kafka_libs/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$(kcluster_seeds)" "$@"
}

# All three at once: a node stopped after the others have gone waits for a
# controller quorum that is no more, and would be killed after 30 s.
kafka_cluster_down() {
  local n
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    if pid_alive "$(kcluster_pid "$n")" "$(kcluster_props "$n")"; then
      kill -TERM "$(cat "$(kcluster_pid "$n")")" 2>/dev/null || true
    fi
  done
  # They stop together, and the node that stops last has no controller
  # quorum left to confirm its controlled shutdown: it would wait for it
  # forever. 10 s each (the first two are gone by then), and the killed
  # node's logs are recovered at its next start.
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    if pid_alive "$(kcluster_pid "$n")" "$(kcluster_props "$n")"; then
      stop_pid "kafka cluster node $n" "$(kcluster_pid "$n")" "$(kcluster_props "$n")" 10
    else
      rm -f "$(kcluster_pid "$n")"
    fi
  done
}

kafka_cluster_status() {
  local n any=no
  for n in $(seq 1 $KAFKA_CLUSTER_NODES); do
    if pid_alive "$(kcluster_pid "$n")" "$(kcluster_props "$n")"; then
      printf '%-8s running  pid %-7s 127.0.0.1:%s (kafka cluster node %s, broker and controller)\n' "kcluster" \
        "$(cat "$(kcluster_pid "$n")")" "$(kcluster_port "$n")" "$n"
      any=yes
    fi
  done
  if [ "$any" = yes ]; then
    echo "kafka cluster partitions (leader, in-sync replicas):"
    kcluster_topics --describe 2>/dev/null | awk '/Partition:/ {
      for (i = 1; i <= NF; i++) { if ($i == "Topic:") t = $(i+1); if ($i == "Partition:") p = $(i+1); if ($i == "Leader:") l = $(i+1); if ($i == "Isr:") s = $(i+1) }
      printf "  %-24s %2s  leader %s  isr %s\n", t, p, l, s }' || echo "  (the cluster does not answer)"
  fi
}

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
