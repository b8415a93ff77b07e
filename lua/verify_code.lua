-- Checks a login code. The right code is used up at once (single use);
-- each wrong try is counted, and the maxTries-th wrong try burns the code,
-- so it cannot be guessed by brute force within its lifetime.
--
-- KEYS[1]  login:code:{phone}  hash {code, tries}
-- ARGV[1]  the code the user sent
-- ARGV[2]  maxTries
--
-- Returns 1 right code (now deleted); 0 wrong code, still usable;
-- -1 no code (never issued, expired, used or burned);
-- -2 wrong code, and that burned it.
local code = redis.call('HGET', KEYS[1], 'code')
if not code then
  return -1
end
if code == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('HINCRBY', KEYS[1], 'tries', 1) >= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return -2
end
return 0
