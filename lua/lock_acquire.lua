-- Takes a re-entrant lock with a fencing token.
--
-- Idempotent by the call's id: the same call sent again (go-redis re-sends
-- a command whose reply timed out) does not count a second hold.
--
-- KEYS[1]  lock:{name}        hash {owner, count, fence, call, released}
-- KEYS[2]  lock:{name}:fence  the lock's fencing counter (never expires)
-- ARGV[1]  the caller's owner token
-- ARGV[2]  TTL, ms
-- ARGV[3]  the call's id
--
-- Returns {1, fence} when the caller holds the lock (taken now, or again by
-- its owner: count goes up, the fence stays); {0, ms} when someone else
-- holds it for ms more.
local h = redis.call('HMGET', KEYS[1], 'owner', 'call', 'fence')
if not h[1] then
  -- What a released lock left behind (its last release's id) goes too.
  redis.call('DEL', KEYS[1])
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'fence', fence, 'call', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, fence}
end
if h[1] == ARGV[1] then
  if h[2] ~= ARGV[3] then
    redis.call('HINCRBY', KEYS[1], 'count', 1)
    redis.call('HSET', KEYS[1], 'call', ARGV[3])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(h[3])}
end
return {0, redis.call('PTTL', KEYS[1])}
