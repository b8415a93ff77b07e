-- Takes a re-entrant lock with a fencing token.
--
-- KEYS[1]  lock:{name}        hash {owner, count, fence}
-- KEYS[2]  lock:{name}:fence  the lock's fencing counter (never expires)
-- ARGV[1]  the caller's owner token
-- ARGV[2]  TTL, ms
--
-- Returns {1, fence} when the caller holds the lock (taken now, or again by
-- its owner: count goes up, the fence stays); {0, ms} when someone else
-- holds it for ms more.
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'fence', fence)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, fence}
end
if owner == ARGV[1] then
  redis.call('HINCRBY', KEYS[1], 'count', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
end
return {0, redis.call('PTTL', KEYS[1])}
