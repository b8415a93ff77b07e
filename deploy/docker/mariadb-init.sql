-- deploy/docker/mysql-init.sql for a MariaDB image (SECKILL_MYSQL_INIT):
-- the same users, with MariaDB's own password plugin.
CREATE DATABASE IF NOT EXISTS seckill CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE USER IF NOT EXISTS 'seckill'@'%' IDENTIFIED BY 'seckill';
GRANT ALL ON *.* TO 'seckill'@'%';
CREATE USER IF NOT EXISTS 'canal'@'%' IDENTIFIED BY 'canal';
GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'canal'@'%';
