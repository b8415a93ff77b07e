-- Puts the directory of a sale of N > 1 buckets under the voucher's own
-- tag, after its buckets are warmed: the gate's first attempt on the
-- voucher lands here and learns N (seckill.lua's OTHER_LAYOUT). The sale's
-- other keys under this tag (a sale of one bucket with the same id, from an
-- earlier database) are deleted.
--
-- KEYS     the sale's keys (sale.lua) under the voucher's own tag
-- Writes:  VOUCHER {buckets}, and deletes BUYERS, PENDING, PENDING_AT,
--          CHANGES, SETTLED, TRANSFERS
-- ARGV[1]  N
redis.call('DEL', VOUCHER, BUYERS, PENDING, PENDING_AT, CHANGES, SETTLED, TRANSFERS)
redis.call('HSET', VOUCHER, 'buckets', ARGV[1])
return 1
