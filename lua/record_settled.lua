-- Records the final status of orders the order-writer settled, for order
-- lookups while the sale's state is in Redis. A sale whose state is gone
-- (retired and expired, never warmed; a voucher hash with no stock is no
-- sale, whatever else it holds) records nothing: its lookups go to
-- MySQL, and a record made now would outlive the sale with no expiry. A
-- retired sale's record expires with its keys. Idempotent: a retry writes
-- the same fields again.
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  SETTLED (it expires with the voucher's hash, when that expires)
-- ARGV     field, value, field, value, ...
--
-- Returns 1 recorded, 0 no such sale.
if redis.call('HEXISTS', VOUCHER, 'stock') == 0 then
  return 0
end
redis.call('HSET', SETTLED, unpack(ARGV))
local ttl = redis.call('PTTL', VOUCHER)
if ttl > 0 then
  redis.call('PEXPIRE', SETTLED, ttl)
end
return 1
