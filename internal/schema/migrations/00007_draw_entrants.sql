-- A draw's entrants of record: kept when the draw begins, in one
-- transaction that also sets draw_entrants to their count, so that every
-- drawer after the first makes the draw among the same entrants (whatever
-- Redis has lost since), and anyone can recompute it from them and the
-- seed long after the sale's state has left Redis. The primary key is the
-- one entry per buyer.

-- +goose Up
CREATE TABLE tb_draw_entrant (
  voucher_id BIGINT UNSIGNED NOT NULL,
  user_id    BIGINT UNSIGNED NOT NULL,
  order_id   BIGINT          NOT NULL,
  PRIMARY KEY (voucher_id, user_id)
);
ALTER TABLE tb_seckill_voucher ADD COLUMN draw_entrants INT NULL;

-- +goose Down
ALTER TABLE tb_seckill_voucher DROP COLUMN draw_entrants;
DROP TABLE tb_draw_entrant;
