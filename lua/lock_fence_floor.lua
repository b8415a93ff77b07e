-- Raises a lock's fencing counter to at least a floor: the resource a lock
-- guards remembers the largest token it has seen, and after the counter's
-- master lost writes (a lossy failover) the counter can be below it, where
-- every new holder's token would be refused as stale. A holder of the lock
-- raises it, having read the floor from the resource, before it releases
-- the lock to take it again. Never lowers it.
--
-- KEYS[1]  lock:{name}:fence  the lock's fencing counter
-- ARGV[1]  the floor
--
-- Returns the counter after.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if cur >= floor then
  return cur
end
redis.call('SET', KEYS[1], ARGV[1])
return floor
