# Kafka for the local stack: the single KRaft broker and the three-node
# cluster. Sourced by stack.sh, whose settings and helpers it uses: one
# command line for every server, a file for each family.
# shellcheck shell=bash

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
