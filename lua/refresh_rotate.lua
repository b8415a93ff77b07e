-- Rotates a refresh token family: the presented token's hash must be the
-- family's current one; it becomes the previous one, and the new hash the
-- current one. The previous token presented again within the grace window
-- is an honest retry (its answer was lost): the caller gets the sealed new
-- token back to open with the presented one. A token the family issued and
-- retired, presented again later, is a reuse: the family is deleted (RFC
-- 9700 §4.14.2), so neither the thief's nor the owner's token refreshes
-- again. A secret the family never issued is unknown and changes nothing:
-- the family id is in every access token, so a made-up secret must not be
-- able to log its victim out.
--
-- KEYS[1] the family's hash
-- ARGV[1] sha-256 of the presented token   ARGV[2] sha-256 of the new token
-- ARGV[3] the new token sealed with the presented one
-- ARGV[4] grace window, ms
-- Fields written: cur, prev, rotated, sealed, and 'x:'..hash per retired
-- token (a week of 15-minute refreshes is some 700 of them).
-- The family keeps the expiry its login gave it: a refresh does not extend
-- a login's lifetime.
-- Returns {'unknown'} | {'reused'} | {'rotated', uid, created, gen}
--       | {'retry', uid, created, gen, sealed}
local f = redis.call('HMGET', KEYS[1], 'cur', 'prev', 'rotated', 'uid', 'created', 'sealed', 'gen')
if not f[1] then
  return {'unknown'}
end
local gen = f[7] or '0'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == f[1] then
  redis.call('HSET', KEYS[1], 'prev', f[1], 'cur', ARGV[2], 'rotated', now, 'sealed', ARGV[3], 'x:' .. f[1], '1')
  return {'rotated', f[4], f[5], gen}
end
if f[2] and ARGV[1] == f[2] and now - tonumber(f[3]) < tonumber(ARGV[4]) then
  return {'retry', f[4], f[5], gen, f[6]}
end
if redis.call('HEXISTS', KEYS[1], 'x:' .. ARGV[1]) == 1 then
  redis.call('DEL', KEYS[1])
  return {'reused'}
end
return {'unknown'}
