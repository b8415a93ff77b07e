-- Releases one hold of a re-entrant lock, only by its owner: a holder whose
-- lock expired and was taken by someone else must not release theirs.
--
-- Idempotent by the call's id: the same call sent again (go-redis re-sends
-- a command whose reply timed out) gets the first answer instead of giving
-- up another hold, or hearing "not held" about the hold it just released.
--
-- KEYS[1]  lock:{name}  hash {owner, count, fence, call, released}
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the call's id
-- ARGV[3]  how long a released lock remembers its last release, ms
--
-- Returns the holds left (0: released) or -1 when the caller does not own it.
local h = redis.call('HMGET', KEYS[1], 'owner', 'released')
if h[2] then
  local id, left = string.match(h[2], '^(.*):(%d+)$')
  if id == ARGV[2] then
    return tonumber(left)
  end
end
if h[1] ~= ARGV[1] then
  return -1
end
local left = redis.call('HINCRBY', KEYS[1], 'count', -1)
if left <= 0 then
  -- Free for anyone (no owner), remembering only this release, briefly.
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'released', ARGV[2] .. ':0')
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 0
end
redis.call('HSET', KEYS[1], 'released', ARGV[2] .. ':' .. left)
return left
