-- Issues a login code for one phone asked from one client address,
-- atomically with its limits. Everything of a code is per (phone,
-- address): its cooldown, its daily count, the code itself and its wrong
-- tries, so that requests and wrong tries from other addresses can
-- neither burn the owner's code nor use up the owner's codes. Above them
-- a per-phone ceiling bounds what one phone receives in a day from all
-- addresses (SMS bombing); it does not apply to an address the phone has
-- logged in from (the owner's), which keeps only its own daily count.
-- Past the ceiling a new address still gets a code when the phone has had
-- none past the ceiling for the slow interval: strangers who used up the
-- ceiling cannot keep the owner at a new address from logging in all day,
-- and the pump past it is bounded to one code per interval.
-- A new code replaces the address's old one and resets its wrong tries.
--
-- Idempotent by the request's id: the same request sent again (go-redis
-- re-sends a command whose reply timed out) is answered "issued" again
-- instead of "wait for the cooldown" that it started itself.
--
-- KEYS[1]  login:code:{phone}:<addr>      hash {code, tries, issued, last, held}
-- KEYS[2]  login:code:last:{phone}:<addr> set while the cooldown runs
-- KEYS[3]  login:code:day:{phone}:<addr>  codes issued today to this address
-- KEYS[4]  login:code:day:{phone}         codes issued today to the phone
-- KEYS[5]  login:trusted:{phone}          set of addresses the phone logged in from
-- KEYS[6]  login:code:slow:{phone}        set while the slow interval past the ceiling runs
-- ARGV[1]  the code
-- ARGV[2]  the code's lifetime, ms
-- ARGV[3]  the cooldown, ms
-- ARGV[4]  codes per address per day
-- ARGV[5]  ms until the day ends
-- ARGV[6]  the request's id
-- ARGV[7]  codes per phone per day from addresses it has not logged in from
-- ARGV[8]  the client address
-- ARGV[9]  the slow interval past the ceiling, ms
--
-- Returns {1, 0} when issued; {0, ms} when the cooldown has ms to run;
-- {-1, ms} when the address's codes for today are used up, for ms more;
-- {-2, ms} when the phone's ceiling is reached and its slow interval has
-- ms to run.
if redis.call('HGET', KEYS[1], 'issued') == ARGV[6] then
  return {1, 0}
end
local cooldown = redis.call('PTTL', KEYS[2])
if cooldown > 0 then
  return {0, cooldown}
end
if tonumber(redis.call('GET', KEYS[3]) or '0') >= tonumber(ARGV[4]) then
  return {-1, redis.call('PTTL', KEYS[3])}
end
if redis.call('SISMEMBER', KEYS[5], ARGV[8]) == 0 and
    tonumber(redis.call('GET', KEYS[4]) or '0') >= tonumber(ARGV[7]) then
  local slow = redis.call('PTTL', KEYS[6])
  if slow > 0 then
    return {-2, slow}
  end
  redis.call('SET', KEYS[6], '1', 'PX', ARGV[9])
end
for _, k in ipairs({KEYS[3], KEYS[4]}) do
  if redis.call('INCR', k) == 1 then
    redis.call('PEXPIRE', k, ARGV[5])
  end
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'tries', 0, 'issued', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 0}
