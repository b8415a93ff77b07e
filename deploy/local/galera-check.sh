#!/bin/sh
# HAProxy's external check of a MariaDB Galera node (stack.sh
# --mysql-cluster): healthy when the node is in a Primary component, takes
# queries (wsrep_reject_queries NONE) and writes (read_only off), and is
# Synced (wsrep_local_state 4) or donates a snapshot by a non-blocking
# method (state 2 with wsrep_sst_method mariabackup, and not desynced by
# an operator: wsrep_desync OFF). Such a donor keeps taking queries and
# writes (MaxScale's available_when_donor); taking it out of rotation
# would cut its sessions, then the backup's when it came back. The method
# a snapshot uses is the joiner's, not the donor's: the donor's own setting
# stands for it because every node has galera-node.cnf's (stack.sh refuses
# a node started with another). A node that
# joins, sits in a minority partition, donates by a blocking method or was
# set aside by an operator is not one to write to. HAProxy calls it with
# <proxy address> <proxy port> <server address> <server port>, and an
# environment of its own (PATH and HAPROXY_*): the user is stack.sh's
# MYSQL_CHECK_USER, which may read the server's status and nothing else.
state=$(mariadb --no-defaults --connect-timeout=1 -h"$3" -P"$4" -ugalera_check -pgalera_check -N -e \
  "SELECT CONCAT(
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_local_state'), '/',
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_status'), '/',
     @@global.wsrep_reject_queries, '/', @@global.read_only, '/',
     @@global.wsrep_desync, '/', @@global.wsrep_sst_method)" 2>/dev/null)
case $state in
  4/Primary/NONE/OFF/*) exit 0 ;;
  2/Primary/NONE/OFF/OFF/mariabackup) exit 0 ;;
  *) exit 1 ;;
esac
