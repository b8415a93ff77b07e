-- Checks a login code. The right code is held for the attempt (single
-- use: no other attempt gets it) until the login ends: spent once its
-- session is stored, released if that failed, so that a Redis at its
-- memory limit, which refuses the session, does not use the code up.
-- The hold is this script's first write: at the limit Redis refuses the
-- script before anything is written. Each wrong try is counted, and the
-- maxTries-th wrong try burns the code, so it cannot be guessed by brute
-- force within its lifetime.
--
-- Idempotent by the attempt's id: the same attempt sent again (go-redis
-- re-sends a command whose reply timed out) gets the first answer, so a
-- right code is not answered "no code" and a wrong try is counted once.
--
-- The code is the one issued to the client address the attempt comes
-- from: wrong tries from elsewhere cannot burn it. A right code makes the
-- address one the phone has logged in from (the per-phone ceiling of
-- issue_code.lua no longer applies to it) for ARGV[5] ms.
--
-- KEYS[1]  login:code:{phone}:<addr>  hash {code, tries, last, held}
-- KEYS[2]  login:trusted:{phone}      set of addresses the phone logged in from
-- ARGV[1]  the code the user sent
-- ARGV[2]  maxTries
-- ARGV[3]  the attempt's id
-- ARGV[4]  the client address
-- ARGV[5]  how long the address stays trusted, ms
--
-- Returns 1 right code (now held by the attempt); 0 wrong code, still
-- usable; -1 no code (never issued, expired, used, held or burned);
-- -2 wrong code, and that burned it.
local h = redis.call('HMGET', KEYS[1], 'code', 'last', 'held')
if h[2] then
  local id, answer = string.match(h[2], '^(.*):(-?%d+)$')
  if id == ARGV[3] then
    return tonumber(answer)
  end
end
if not h[1] or h[3] then
  return -1
end
local function answer(a)
  redis.call('HSET', KEYS[1], 'last', ARGV[3] .. ':' .. a)
  return a
end
if h[1] == ARGV[1] then
  redis.call('HSET', KEYS[1], 'held', ARGV[3], 'last', ARGV[3] .. ':1')
  redis.call('SADD', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  return 1
end
if redis.call('HINCRBY', KEYS[1], 'tries', 1) >= tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[1], 'code', 'tries')
  return answer(-2)
end
return answer(0)
