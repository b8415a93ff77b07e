-- The flash-sale gate: one atomic decision per order attempt. Every key
-- belongs to one voucher and carries its hash tag, so the script runs on
-- Redis Cluster.
--
-- KEYS[1]  seckill:voucher:{id}     hash {stock, begin, end} (ms since 1970)
-- KEYS[2]  seckill:buyers:{id}      set of user ids that bought
-- KEYS[3]  seckill:pending:{id}     hash order id -> "userId:acceptedMs"
-- KEYS[4]  seckill:pending-at:{id}  zset order id by acceptedMs
-- ARGV[1]  user id
-- ARGV[2]  order id
--
-- Returns {outcome, stock left, now ms}. Outcome: 0 accepted (one unit
-- taken, buyer and reservation recorded); 1 unknown voucher; 2 not
-- started; 3 ended; 4 already bought; 5 sold out.
local v = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end')
if not v[1] then
  return {1, 0, 0}
end
-- The server's clock, not the caller's: one clock for every API instance.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stock = tonumber(v[1])
if now < tonumber(v[2]) then
  return {2, stock, now}
end
if now >= tonumber(v[3]) then
  return {3, stock, now}
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return {4, stock, now}
end
if stock <= 0 then
  return {5, 0, now}
end
redis.call('HINCRBY', KEYS[1], 'stock', -1)
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1] .. ':' .. now)
redis.call('ZADD', KEYS[4], now, ARGV[2])
return {0, stock - 1, now}
