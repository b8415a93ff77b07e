-- Raises an id counter to at least a floor: after Redis lost writes, the
-- counter may be below sequence numbers already handed out, and would hand
-- them out again. Never lowers it; keeps its expiry.
--
-- KEYS[1]  id:{kind}:{day}  the day's sequence counter
-- ARGV[1]  the floor
--
-- Returns the counter after.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if cur >= floor then
  return cur
end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
return floor
