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
-- KEYS[1]  seckill:voucher:{id}  hash {stock, begin, end, frozen, epoch, fence, reconciled}
-- KEYS[2]  seckill:changes:{id}  hash change id -> stock after it
-- KEYS[3]  seckill:buyers:{id}, KEYS[4] seckill:pending:{id},
-- KEYS[5]  seckill:pending-at:{id}, KEYS[6] seckill:settled:{id}: kept
--          with the sale
-- ARGV[1]  stock delta (may be negative)
-- ARGV[2]  new begin, ms, or "" to keep it
-- ARGV[3]  new end, ms, or "" to keep it
-- ARGV[4]  the change's id
-- ARGV[5]  how long the change's id is remembered, ms
--
-- Returns {1, stock} when done; {0, stock} when the delta would take the
-- stock below zero (nothing changed); {-1, 0} when the voucher is not warmed;
-- {-2, 0} when its sale is frozen for a reconcile (nothing changed).
local done = redis.call('HGET', KEYS[2], ARGV[4])
if done then
  return {1, tonumber(done)}
end
local v = redis.call('HMGET', KEYS[1], 'stock', 'frozen')
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
redis.call('HSET', KEYS[1], 'stock', after)
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'begin', ARGV[2])
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'end', ARGV[3])
end
for i = 1, #KEYS do
  redis.call('PERSIST', KEYS[i])
end
redis.call('HSET', KEYS[2], ARGV[4], after)
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return {1, after}
