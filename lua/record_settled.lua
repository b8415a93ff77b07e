-- Records the final status of orders the order-writer settled, for order
-- lookups while the sale's state is in Redis. A sale whose state is gone
-- (retired and expired, never warmed) records nothing: its lookups go to
-- MySQL, and a record made now would outlive the sale with no expiry. A
-- retired sale's record expires with its keys. Idempotent: a retry writes
-- the same fields again.
--
-- KEYS[1]  seckill:voucher:{id}
-- KEYS[2]  seckill:settled:{id}   hash "o:<order id>" -> status, "u:<user id>" -> failed order id
-- ARGV     field, value, field, value, ...
--
-- Returns 1 recorded, 0 no such sale.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], unpack(ARGV))
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
