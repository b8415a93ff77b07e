-- The gate's shape without its rules: one buyer once, a unit taken, the
-- reservation kept; every key under the sale's hash tag.
-- KEYS[1] stock, KEYS[2] buyers, KEYS[3] reservations
-- ARGV[1] buyer, ARGV[2] order id
-- Returns 0 taken, 1 already bought, 2 sold out.
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return 1
end
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  return 2
end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
return 0
