-- "Log out everywhere" for the refresh side: the user's logout generation
-- goes up, so every family stored with a lower one is refused at its next
-- refresh, whether or not its delete below succeeds; the user's index is
-- read and emptied in the same step.
--
-- KEYS[1] the user's set of families   KEYS[2] the user's logout generation
-- ARGV[1] how long to keep the generation, ms (as refresh_index.lua)
-- Returns the family ids to delete.
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
local fids = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
return fids
