-- Changes a warmed voucher's stock by a delta and, if given, its window,
-- atomically with the gate: stock never goes below zero, even with orders
-- being taken at the same moment.
--
-- Idempotent by the change's id: the same change sent again (go-redis
-- re-sends a command whose reply timed out) is not applied twice; it gets
-- the first answer.
--
-- A change brings a retired sale back: its keys lose their expiry, the
-- settled records too (the caller puts the voucher back in the relay's
-- active set); the changes keep only their own memory's expiry.
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  VOUCHER {stock, begin, end}, CHANGES (the change's id, with its
--          memory's expiry); PERSIST on the others
-- ARGV[1]  stock delta (may be negative)
-- ARGV[2]  new begin, ms, or "" to keep it
-- ARGV[3]  new end, ms, or "" to keep it
-- ARGV[4]  the change's id
-- ARGV[5]  how long the change's id is remembered, ms
--
-- Returns {1, stock} when done; {0, stock} when the delta would take the
-- stock below zero (nothing changed); {-1, 0} when the voucher is not warmed;
-- {-2, 0} when its sale is frozen for a reconcile (nothing changed).
local done = redis.call('HGET', CHANGES, ARGV[4])
if done then
  return {1, tonumber(done)}
end
local v = redis.call('HMGET', VOUCHER, 'stock', 'frozen')
if v[2] then
  return {-2, 0}
end
local stock = v[1]
if not stock then
  return {-1, 0}
end
local after = tonumber(stock) + tonumber(ARGV[1])
if after < 0 then
  return {0, tonumber(stock)}
end
redis.call('HSET', VOUCHER, 'stock', after)
if ARGV[2] ~= '' then
  redis.call('HSET', VOUCHER, 'begin', ARGV[2])
end
if ARGV[3] ~= '' then
  redis.call('HSET', VOUCHER, 'end', ARGV[3])
end
persist_all()
redis.call('HSET', CHANGES, ARGV[4], after)
redis.call('PEXPIRE', CHANGES, ARGV[5])
return {1, after}
