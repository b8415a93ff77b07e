-- Indexes a new refresh family under its user, before the family is
-- stored, and reads the user's logout generation for it: a "log out
-- everywhere" that runs between this and the family's store leaves a
-- family of an older generation, which its first refresh refuses.
--
-- KEYS[1] the user's set of families   KEYS[2] the user's logout generation
-- ARGV[1] the family id   ARGV[2] how long to keep both, ms (a family's
-- lifetime and a margin: the generation outlives every family it judges)
-- Returns the generation (0 when the user was never logged out everywhere).
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local gen = redis.call('GET', KEYS[2])
if not gen then
  return 0
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return tonumber(gen)
