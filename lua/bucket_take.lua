-- The first step of moving stock between buckets of one sale: takes units
-- from this bucket (the donor) and records the transfer by its id until the
-- receiver's deposit is seen (the caller then deletes the record). Between
-- the two steps the units are in no bucket's stock: a crash there can only
-- undersell, until the relay's sweep deposits them (gate/transfer.go).
--
-- Idempotent by the transfer's id: sent again, it answers what it took.
-- Nothing is taken from a bucket that is frozen, or built under another
-- replication id than its server's (it may have lost the writes of units
-- sold: moving them would sell them twice).
--
-- KEYS     the sale's keys (sale.lua) of the donor
-- Writes:  VOUCHER {stock, given}, TRANSFERS (the transfer)
-- ARGV[1]  the transfer's id
-- ARGV[2]  the receiving bucket
-- ARGV[3]  units wanted
-- ARGV[4]  the receiver's generation ("reconciled") as the mover read it
--          before this take: the deposit is void if it has changed since
--
-- The record is "receiver:units:donor's generation:receiver's
-- generation:ms".
--
-- Returns the units taken: 0 when it has none or may not give.
local t = redis.call('HGET', TRANSFERS, ARGV[1])
if t then
  return tonumber(string.match(t, '^%d+:(%d+):'))
end
local v = redis.call('HMGET', VOUCHER, 'stock', 'frozen', 'epoch', 'reconciled')
local stock = tonumber(v[1] or '0')
if v[2] or stock <= 0 or (v[3] and v[3] ~= replid()) then
  return 0
end
local units = math.min(stock, tonumber(ARGV[3]))
redis.call('HINCRBY', VOUCHER, 'stock', -units)
redis.call('HINCRBY', VOUCHER, 'given', units)
redis.call('HSET', TRANSFERS, ARGV[1], table.concat({ARGV[2], units, v[4] or '', ARGV[4], now_ms()}, ':'))
return units
