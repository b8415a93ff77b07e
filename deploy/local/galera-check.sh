#!/bin/sh
# HAProxy's external check of a MariaDB Galera node (stack.sh
# --mysql-cluster): healthy only when the node is Synced
# (wsrep_local_state 4) in a Primary component, takes queries
# (wsrep_reject_queries NONE) and writes (read_only off). A node that
# accepts connections while it donates a snapshot, joins, sits in a
# minority partition, or was set aside by an operator is not one to
# write to. HAProxy calls it with
# <proxy address> <proxy port> <server address> <server port>, and an
# environment of its own (PATH and HAPROXY_*): the user is stack.sh's
# MYSQL_CHECK_USER, which may read the server's status and nothing else.
state=$(mariadb --no-defaults --connect-timeout=1 -h"$3" -P"$4" -ugalera_check -pgalera_check -N -e \
  "SELECT CONCAT(
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_local_state'), '/',
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_status'), '/',
     @@global.wsrep_reject_queries, '/', @@global.read_only)" 2>/dev/null)
[ "$state" = 4/Primary/NONE/OFF ]
