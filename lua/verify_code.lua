-- Checks a login code. The right code is used up at once (single use);
-- each wrong try is counted, and the maxTries-th wrong try burns the code,
-- so it cannot be guessed by brute force within its lifetime.
--
-- Idempotent by the attempt's id: the same attempt sent again (go-redis
-- re-sends a command whose reply timed out) gets the first answer, so a
-- right code is not answered "no code" and a wrong try is counted once.
--
-- KEYS[1]  login:code:{phone}  hash {code, tries, last}
-- ARGV[1]  the code the user sent
-- ARGV[2]  maxTries
-- ARGV[3]  the attempt's id
--
-- Returns 1 right code (now used up); 0 wrong code, still usable;
-- -1 no code (never issued, expired, used or burned);
-- -2 wrong code, and that burned it.
local h = redis.call('HMGET', KEYS[1], 'code', 'last')
if h[2] then
  local id, answer = string.match(h[2], '^(.*):(-?%d+)$')
  if id == ARGV[3] then
    return tonumber(answer)
  end
end
if not h[1] then
  return -1
end
local function answer(a)
  redis.call('HSET', KEYS[1], 'last', ARGV[3] .. ':' .. a)
  return a
end
if h[1] == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'code', 'tries')
  return answer(1)
end
if redis.call('HINCRBY', KEYS[1], 'tries', 1) >= tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[1], 'code', 'tries')
  return answer(-2)
end
return answer(0)
