# Redis for the local stack: the single node, the caches' Redis, the
# master's replica and the Redis Cluster. Sourced by stack.sh, whose
# settings and helpers it uses: one command line for every server, a file
# for each family.
# shellcheck shell=bash

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
