-- The tables of the course (004 notes) that the mission needs, written so
-- that they run unchanged on MySQL 8 and MariaDB 10.11: no integer display
-- widths, no UNSIGNED on floating point, explicit charset and collation.

-- +goose Up
CREATE TABLE tb_user (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  phone       VARCHAR(11)     NOT NULL,
  password    VARCHAR(128)    NOT NULL DEFAULT '',
  nick_name   VARCHAR(32)     NOT NULL DEFAULT '',
  icon        VARCHAR(255)    NOT NULL DEFAULT '',
  create_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  UNIQUE KEY uk_phone (phone)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

CREATE TABLE tb_shop_type (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name        VARCHAR(32)     NOT NULL,
  icon        VARCHAR(255)    NOT NULL DEFAULT '',
  sort        INT UNSIGNED    NOT NULL DEFAULT 0,
  create_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- images: a comma-separated list of URLs; score: an int out of 50 (4.7 stars
-- is 47); avg_price in yuan, as the course's client shows it.
CREATE TABLE tb_shop (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name        VARCHAR(128)    NOT NULL,
  type_id     BIGINT UNSIGNED NOT NULL,
  images      VARCHAR(1024)   NOT NULL DEFAULT '',
  area        VARCHAR(128)    NULL,
  address     VARCHAR(255)    NOT NULL DEFAULT '',
  x           DOUBLE          NOT NULL DEFAULT 0,
  y           DOUBLE          NOT NULL DEFAULT 0,
  avg_price   BIGINT UNSIGNED NULL,
  sold        INT UNSIGNED    NOT NULL DEFAULT 0,
  comments    INT UNSIGNED    NOT NULL DEFAULT 0,
  score       INT UNSIGNED    NOT NULL DEFAULT 0,
  open_hours  VARCHAR(32)     NULL,
  create_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  KEY idx_type_id (type_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- pay_value and actual_value in fen (200 is 2 yuan); type 0 ordinary,
-- 1 seckill; status 1 on sale, 2 off sale, 3 expired.
CREATE TABLE tb_voucher (
  id           BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
  shop_id      BIGINT UNSIGNED  NULL,
  title        VARCHAR(255)     NOT NULL,
  sub_title    VARCHAR(255)     NULL,
  rules        VARCHAR(1024)    NULL,
  pay_value    BIGINT UNSIGNED  NOT NULL,
  actual_value BIGINT           NOT NULL,
  type         TINYINT UNSIGNED NOT NULL DEFAULT 0,
  status       TINYINT UNSIGNED NOT NULL DEFAULT 1,
  create_time  TIMESTAMP        NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time  TIMESTAMP        NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  KEY idx_shop_id (shop_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- One row per seckill voucher. stock is what MySQL still allows: the
-- order-writer decrements it per inserted order and never below zero, so the
-- database stays the final arbiter against oversell.
CREATE TABLE tb_seckill_voucher (
  voucher_id  BIGINT UNSIGNED NOT NULL,
  stock       INT             NOT NULL,
  create_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  begin_time  TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  end_time    TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (voucher_id),
  CONSTRAINT chk_stock_not_negative CHECK (stock >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- id is the order id the API handed out (time-ordered, from the ID
-- generator, never AUTO_INCREMENT): a redelivered event inserts the same id
-- and changes nothing. UNIQUE (user_id, voucher_id) makes one order per user
-- hold in the database too, whatever happens to Redis.
-- status 1 unpaid, 2 paid, 3 used, 4 cancelled, 5 refunding, 6 refunded.
CREATE TABLE tb_voucher_order (
  id          BIGINT           NOT NULL,
  user_id     BIGINT UNSIGNED  NOT NULL,
  voucher_id  BIGINT UNSIGNED  NOT NULL,
  pay_type    TINYINT UNSIGNED NOT NULL DEFAULT 1,
  status      TINYINT UNSIGNED NOT NULL DEFAULT 1,
  create_time TIMESTAMP        NOT NULL DEFAULT CURRENT_TIMESTAMP,
  pay_time    TIMESTAMP        NULL DEFAULT NULL,
  use_time    TIMESTAMP        NULL DEFAULT NULL,
  refund_time TIMESTAMP        NULL DEFAULT NULL,
  update_time TIMESTAMP        NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  UNIQUE KEY uk_user_voucher (user_id, voucher_id),
  KEY idx_voucher_id (voucher_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- Orders the API accepted but MySQL refused (no stock left in the database,
-- the user already holds another order for the voucher): kept with the
-- reason so that no accepted order is silently lost. Keyed by order id, so
-- a redelivered event records its failure once.
CREATE TABLE tb_voucher_order_failure (
  order_id    BIGINT          NOT NULL,
  user_id     BIGINT UNSIGNED NOT NULL,
  voucher_id  BIGINT UNSIGNED NOT NULL,
  reason      VARCHAR(32)     NOT NULL,
  detail      VARCHAR(255)    NOT NULL DEFAULT '',
  order_time  TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  create_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (order_id),
  KEY idx_user_voucher (user_id, voucher_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- +goose Down
DROP TABLE tb_voucher_order_failure;
DROP TABLE tb_voucher_order;
DROP TABLE tb_seckill_voucher;
DROP TABLE tb_voucher;
DROP TABLE tb_shop;
DROP TABLE tb_shop_type;
DROP TABLE tb_user;
