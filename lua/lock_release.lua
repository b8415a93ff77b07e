-- Releases one hold of a re-entrant lock, only by its owner: a holder whose
-- lock expired and was taken by someone else must not release theirs.
--
-- KEYS[1]  lock:{name}
-- ARGV[1]  the caller's owner token
--
-- Returns the holds left (0: released) or -1 when the caller does not own it.
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return -1
end
local left = redis.call('HINCRBY', KEYS[1], 'count', -1)
if left <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
return left
