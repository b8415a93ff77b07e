-- A flash sale's admission (docs/bot-defence.md): first-come (0), or a
-- draw whose window is the sale's first admission_window seconds, and the
-- draw's seed, kept before any entrant is served so that the draw can be
-- made again by another drawer and recomputed by anyone who checks it.
-- Plain ADD COLUMN with defaults: the same statements on MySQL 8 and
-- MariaDB 10.11, and every sale made before them is first-come.

-- +goose Up
ALTER TABLE tb_seckill_voucher ADD COLUMN admission_window INT NOT NULL DEFAULT 0;
ALTER TABLE tb_seckill_voucher ADD COLUMN draw_seed CHAR(64) NULL;

-- +goose Down
ALTER TABLE tb_seckill_voucher DROP COLUMN draw_seed;
ALTER TABLE tb_seckill_voucher DROP COLUMN admission_window;
