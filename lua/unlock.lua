-- Releases a lock only if the caller still owns it: a holder whose lock
-- expired and was taken by someone else must not delete the new owner's key.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token the caller locked with
--
-- Returns 1 when the key was ours and is deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
