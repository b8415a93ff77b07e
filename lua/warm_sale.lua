-- Puts a new voucher's sale in place, or one bucket of it: its stock and
-- window, no buyers and no reservations (keys left by an earlier database
-- with the same voucher id would otherwise leak into the new sale), stamped
-- with the replication id of the server that runs this: on Redis Cluster,
-- the master that owns the bucket's slot.
--
-- KEYS     the sale's keys (sale.lua), every one deleted first
-- KEYS[SHARED + 1]  seckill:entrants:{id}  the draw's entries (seckill.lua)
-- Writes:  VOUCHER {stock, begin, end, epoch, buckets, given, received,
--          draw}, and deletes BUYERS, PENDING, PENDING_AT, CHANGES,
--          SETTLED, TRANSFERS, ENTRANTS
-- ARGV[1]  stock
-- ARGV[2]  begin, ms
-- ARGV[3]  end, ms
-- ARGV[4]  how many buckets the sale has: 1 writes no bucket fields
-- ARGV[5]  "new": only where the bucket is not there yet (a retried
--          creation must not put back a sale that may be selling)
-- ARGV[6]  the draw's window, ms: its first ms of the sale are entries,
--          drawn at its end (seckill.lua); 0 for a first-come sale
--
-- Returns 1, or 0 when ARGV[5] is "new" and the bucket is there.
--
-- A warmed sale has no "reconciled" field: its generation is "" until a
-- reconcile rebuilds it (bucket_deposit.lua).
if ARGV[5] == 'new' and redis.call('EXISTS', VOUCHER) == 1 then
  return 0
end
local ENTRANTS = KEYS[SHARED + 1]
redis.call('DEL', VOUCHER, BUYERS, PENDING, PENDING_AT, CHANGES, SETTLED, TRANSFERS, ENTRANTS)
redis.call('HSET', VOUCHER, 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3], 'epoch', replid())
if ARGV[6] ~= '0' then
  redis.call('HSET', VOUCHER, 'draw', ARGV[6])
end
if ARGV[4] ~= '1' then
  redis.call('HSET', VOUCHER, 'buckets', ARGV[4], 'given', 0, 'received', 0)
end
return 1
