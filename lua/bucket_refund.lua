-- Gives a transfer's units back to the bucket that gave them (the donor),
-- when its deposit was void (bucket_deposit.lua: the receiver was rebuilt
-- since the mover read it). A donor rebuilt since the take got its stock
-- from MySQL, which counts the units: it gets nothing back, and only the
-- record goes. A reconcile that stopped half way rebuilds some buckets
-- only; without this the units of a transfer to one of them would stay
-- counted in the donor's given, and the sale never sold out.
--
-- Idempotent: the record goes with the first run.
--
-- KEYS     the sale's keys (sale.lua) of the donor
-- Writes:  VOUCHER {stock, given}, TRANSFERS (the transfer deleted)
-- ARGV[1]  the transfer's id
--
-- Returns the units given back.
local t = redis.call('HGET', TRANSFERS, ARGV[1])
if not t then
  return 0
end
redis.call('HDEL', TRANSFERS, ARGV[1])
local units, gen = string.match(t, '^%d+:(%d+):([^:]*):')
if (redis.call('HGET', VOUCHER, 'reconciled') or '') ~= gen then
  return 0
end
redis.call('HINCRBY', VOUCHER, 'stock', tonumber(units))
redis.call('HINCRBY', VOUCHER, 'given', -tonumber(units))
return tonumber(units)
