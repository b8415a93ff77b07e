-- Issues a login code for one phone, atomically with its limits: at most one
-- code per cooldown and dailyMax codes per day. A new code replaces the old
-- one and resets its wrong tries.
--
-- Idempotent by the request's id: the same request sent again (go-redis
-- re-sends a command whose reply timed out) is answered "issued" again
-- instead of "wait for the cooldown" that it started itself.
--
-- KEYS[1]  login:code:{phone}       hash {code, tries, issued}
-- KEYS[2]  login:code:last:{phone}  set while the cooldown runs
-- KEYS[3]  login:code:day:{phone}   codes issued today
-- ARGV[1]  the code
-- ARGV[2]  the code's lifetime, ms
-- ARGV[3]  the cooldown, ms
-- ARGV[4]  dailyMax
-- ARGV[5]  ms until the day ends
-- ARGV[6]  the request's id
--
-- Returns {1, 0} when issued; {0, ms} when the cooldown has ms to run;
-- {-1, ms} when today's codes are used up, for ms more.
if redis.call('HGET', KEYS[1], 'issued') == ARGV[6] then
  return {1, 0}
end
local cooldown = redis.call('PTTL', KEYS[2])
if cooldown > 0 then
  return {0, cooldown}
end
local sent = tonumber(redis.call('GET', KEYS[3]) or '0')
if sent >= tonumber(ARGV[4]) then
  return {-1, redis.call('PTTL', KEYS[3])}
end
if redis.call('INCR', KEYS[3]) == 1 then
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'tries', 0, 'issued', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 0}
