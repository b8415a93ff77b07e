-- The same users as deploy/local/stack.sh creates on MariaDB.
CREATE DATABASE IF NOT EXISTS seckill CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE USER IF NOT EXISTS 'seckill'@'%' IDENTIFIED WITH mysql_native_password BY 'seckill';
GRANT ALL ON *.* TO 'seckill'@'%';
CREATE USER IF NOT EXISTS 'canal'@'%' IDENTIFIED WITH mysql_native_password BY 'canal';
GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'canal'@'%';
