-- How a flash sale keeps bots from its stock (docs/bot-defence.md): none
-- (anyone logged in orders at the fixed route), path (an order path issued
-- per buyer once the sale is open) or challenge (the path only after a
-- solved picture challenge). Fixed for the sale's life. Plain ADD COLUMN
-- with a default: the same statement on MySQL 8 and MariaDB 10.11, and
-- every sale made before it is a sale without a defence.

-- +goose Up
ALTER TABLE tb_seckill_voucher ADD COLUMN bot_check VARCHAR(16) NOT NULL DEFAULT 'none';

-- +goose Down
ALTER TABLE tb_seckill_voucher DROP COLUMN bot_check;
