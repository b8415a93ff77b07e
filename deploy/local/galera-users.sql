-- The MariaDB Galera cluster's database and users, made once on the node
-- that bootstraps it (the others receive them by snapshot): stack.sh up
-- --mysql-cluster and the compose file's galera profile both. The names
-- are stack.sh's MYSQL_* ones; galera-check.sh logs in as the last, which
-- may read a node's status and nothing else.
CREATE DATABASE IF NOT EXISTS `seckill` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE USER IF NOT EXISTS 'seckill'@'127.0.0.1' IDENTIFIED BY 'seckill';
GRANT ALL PRIVILEGES ON *.* TO 'seckill'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'canal'@'127.0.0.1' IDENTIFIED BY 'canal';
GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'canal'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'galera_check'@'127.0.0.1' IDENTIFIED BY 'galera_check';
