-- Writes a rebuilt cache entry only if the caller still owns the rebuild.
-- An invalidation deletes the whole entry, owner included, so a reader
-- that loaded the row before the change cannot write it back after.
--
-- KEYS[1]  the entry
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the value
-- ARGV[3]  the physical TTL, ms (0: none)
-- ARGV[4]  the logical expiry, ms since 1970 (0: none)
--
-- Returns 1 when written, 0 when the caller no longer owns the entry. The
-- same call sent again (go-redis re-sends a command whose reply timed out)
-- finds its value in an entry nobody owns and gets 1 again.
local h = redis.call('HMGET', KEYS[1], 'owner', 'v')
if h[1] ~= ARGV[1] then
  if not h[1] and h[2] == ARGV[2] then
    return 1
  end
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'exp', ARGV[4])
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
