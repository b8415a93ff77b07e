-- Extends a lock's TTL, only by its owner.
--
-- KEYS[1]  lock:{name}
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the new TTL, ms
--
-- Returns 1 when extended, 0 when the caller no longer owns it.
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
