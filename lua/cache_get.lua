-- Reads a cache entry and, when it must be rebuilt, hands the rebuild to
-- exactly one caller by recording it as the entry's owner for a lease.
--
-- KEYS[1]  the entry: hash {v, exp, owner, until}
-- ARGV[1]  the caller's owner token
-- ARGV[2]  the lease, ms
--
-- Returns {value or false, state}. state: "fresh"; "stale" (logically
-- expired, someone else rebuilds); "stale-rebuild" (logically expired, the
-- caller rebuilds in the background); "rebuild" (missing, the caller
-- rebuilds); "wait" (missing, someone else rebuilds).
--
-- Idempotent by the owner token: the same call sent again (go-redis
-- re-sends a command whose reply timed out) finds its own lease and is
-- told to rebuild again, not to wait for itself.
local h = redis.call('HMGET', KEYS[1], 'v', 'exp', 'owner', 'until')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local free = (not h[3]) or h[3] == ARGV[1] or tonumber(h[4] or '0') < now
local function take()
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'until', now + tonumber(ARGV[2]))
end
if h[1] then
  local exp = tonumber(h[2] or '0')
  if exp == 0 or now < exp then
    return {h[1], 'fresh'}
  end
  if free then
    take()
    return {h[1], 'stale-rebuild'}
  end
  return {h[1], 'stale'}
end
if free then
  take()
  -- A lock-only entry must not outlive an abandoned rebuild.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {false, 'rebuild'}
end
return {false, 'wait'}
