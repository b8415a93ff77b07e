-- Ends the hold a right code got from verify_code.lua for one login
-- attempt: spends the code (the login has its session) or releases it
-- (storing the session failed: the user may try the code again). Only
-- deletes, so that it runs at Redis's memory limit too, and only the
-- attempt's own hold: a code issued again meanwhile is not touched.
--
-- KEYS[1]  login:code:{phone}:<addr>  hash {code, tries, last, held}
-- ARGV[1]  the attempt's id
-- ARGV[2]  1 spend, 0 release
--
-- Returns 1 when the hold was the attempt's, 0 otherwise.
if redis.call('HGET', KEYS[1], 'held') ~= ARGV[1] then
  return 0
end
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[1], 'code', 'tries', 'held')
else
  redis.call('HDEL', KEYS[1], 'held')
end
return 1
