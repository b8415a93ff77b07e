-- The admin's Idempotency-Key on a creating route (POST /voucher,
-- POST /voucher/seckill): the key, the route, a hash of what was asked
-- and the id made, written in the creation's own transaction. A retry
-- with the same key is answered the first creation's id; with another
-- body, 422. A creation whose COMMIT's answer was lost cannot make a
-- second voucher on a retry: the key's primary key admits one row, and
-- the second transaction waits for the first's (or, on Galera, fails its
-- certification). The same statement on MySQL 8 and MariaDB 10.11.

-- +goose Up
CREATE TABLE tb_idempotency_key (
  route        VARCHAR(64)     NOT NULL,
  idem_key     VARCHAR(255)    NOT NULL,
  request_hash CHAR(64)        NOT NULL,
  resource_id  BIGINT UNSIGNED NOT NULL,
  create_time  TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (route, idem_key)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- +goose Down
DROP TABLE tb_idempotency_key;
