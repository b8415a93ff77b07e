-- Puts a new voucher's sale in place: its stock and window, no buyers and
-- no reservations (keys left by an earlier database with the same voucher
-- id would otherwise leak into the new sale), stamped with the replication
-- id of the server that runs this: on Redis Cluster, the master that owns
-- the voucher's slot.
--
-- KEYS     the sale's keys (sale.lua), every one deleted first
-- Writes:  VOUCHER {stock, begin, end, epoch}, and deletes BUYERS, PENDING,
--          PENDING_AT, CHANGES, SETTLED
-- ARGV[1]  stock
-- ARGV[2]  begin, ms
-- ARGV[3]  end, ms
redis.call('DEL', VOUCHER, BUYERS, PENDING, PENDING_AT, CHANGES, SETTLED)
redis.call('HSET', VOUCHER, 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3], 'epoch', replid())
return 1
