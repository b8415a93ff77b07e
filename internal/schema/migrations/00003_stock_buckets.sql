-- A flash-sale voucher is sold from N stock buckets in Redis, each on its
-- own slot (docs/design.md, "One hot item across masters"). N is fixed for
-- the sale's life, and kept here so that a reconcile rebuilds every bucket
-- even when Redis lost the sale's directory. 1 is the layout every sale had
-- before. Plain ADD COLUMN: the same statement on MySQL 8 and MariaDB 10.11.

-- +goose Up
ALTER TABLE tb_seckill_voucher ADD COLUMN stock_buckets TINYINT UNSIGNED NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE tb_seckill_voucher DROP COLUMN stock_buckets;
