-- The flash-sale gate: one atomic decision per order attempt. Every key
-- belongs to one voucher and carries its hash tag, so the script runs on
-- Redis Cluster.
--
-- The decision is idempotent by the order id: a client that sends the same
-- attempt again (go-redis re-sends a command whose reply timed out) gets
-- the first decision back, not "already bought" for its own order.
--
-- KEYS[1]  seckill:voucher:{id}     hash {stock, begin, end, frozen, epoch}
-- KEYS[2]  seckill:buyers:{id}      hash user id -> order id
-- KEYS[3]  seckill:pending:{id}     hash order id -> "userId:acceptedMs"
-- KEYS[4]  seckill:pending-at:{id}  zset order id by acceptedMs
-- ARGV[1]  user id
-- ARGV[2]  order id
-- ARGV[3]  the replication id of this Redis as the caller last read it,
--          or "" not to check it
--
-- Returns {outcome, stock left, ms, order id}. Outcome: 0 accepted (one
-- unit taken, buyer and reservation recorded; ms is when it was accepted);
-- 1 unknown voucher; 2 not started; 3 ended; 4 already bought (order id is
-- the buyer's order); 5 sold out; 6 paused (frozen while its state is
-- rebuilt from MySQL, or built under another replication id than this
-- Redis's — a restart or a failover may have lost writes — and not yet
-- reconciled: nothing taken). ms is the server's clock otherwise.
local v = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end', 'frozen', 'epoch')
if not v[1] then
  return {1, 0, 0, 0}
end
-- The server's clock, not the caller's: one clock for every API instance.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stock = tonumber(v[1])
local bought = redis.call('HGET', KEYS[2], ARGV[1])
if bought == ARGV[2] then
  local r = redis.call('HGET', KEYS[3], ARGV[2])
  local at = r and tonumber(string.match(r, ':(%d+)$')) or now
  return {0, stock, at, bought}
end
if v[4] or (ARGV[3] and ARGV[3] ~= '' and v[5] and v[5] ~= ARGV[3]) then
  return {6, stock, now, 0}
end
if now < tonumber(v[2]) then
  return {2, stock, now, 0}
end
if now >= tonumber(v[3]) then
  return {3, stock, now, 0}
end
if bought then
  return {4, stock, now, bought}
end
if stock <= 0 then
  return {5, 0, now, 0}
end
redis.call('HINCRBY', KEYS[1], 'stock', -1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1] .. ':' .. now)
redis.call('ZADD', KEYS[4], now, ARGV[2])
return {0, stock - 1, now, ARGV[2]}
