# MariaDB for the local stack: the single server and the Galera cluster,
# with the cluster's HAProxy (here, not in haproxy.sh, which balances the
# api instances: this one starts, stops and is checked with the cluster).
# Sourced by stack.sh, whose settings and helpers it uses.
# shellcheck shell=bash

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

# mcluster_join N: mcluster_wait for a node that joins. Two nodes joining
# at once can miss each other's view on a loaded machine and give up
# ("failed to reach primary view"): a node that exits so is launched again
# once, on its own, rather than waited for until the timeout.
mcluster_join() {
  local n=$1 try deadline
  for try in first again; do
    deadline=$((SECONDS + 180))
    until mcluster_synced "$n"; do
      mcluster_running "$n" && [ $SECONDS -lt $deadline ] || break
      sleep 0.5
    done
    if mcluster_synced "$n"; then
      say "mariadb cluster node $n (Synced, Primary) answers"
      return 0
    fi
    if [ "$try" = again ] || mcluster_running "$n"; then return 1; fi
    say "mariadb cluster node $n exited while joining (see $logs_dir/mariadb-cluster-$n.log); launching it again"
    mcluster_launch "$n"
  done
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
    mcluster_join "$n" \
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
