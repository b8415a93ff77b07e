-- The order paths' keys (internal/botcheck): a hash of the current key's
-- id and each kept key by its id, 1 to 255.
-- KEYS[1] the ring
-- ARGV[1] "ensure": make a key only when the ring has no current one (the
--         first api instance, or after the ring was deleted);
--         "rotate": the new key becomes current, the current one previous,
--         any older one is dropped
-- ARGV[2] the new key's bytes (used only when one is made)
-- Returns the ring as HGETALL does.
local cur = redis.call('HGET', KEYS[1], 'current')
if ARGV[1] == 'ensure' and cur and redis.call('HEXISTS', KEYS[1], cur) == 1 then
  return redis.call('HGETALL', KEYS[1])
end
local nextID = 1
if cur then
  nextID = tonumber(cur) % 255 + 1
end
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if f ~= 'current' and f ~= cur then
    redis.call('HDEL', KEYS[1], f)
  end
end
redis.call('HSET', KEYS[1], tostring(nextID), ARGV[2], 'current', tostring(nextID))
return redis.call('HGETALL', KEYS[1])
