-- Appends a revocation to the feed every API instance follows, and trims
-- the entries older than the access tokens they revoke. The cut is by
-- Redis's clock, the new entry's id, not the writing instance's: an
-- instance whose clock runs ahead must not trim entries that still matter.
--
-- KEYS[1] the revocation stream
-- ARGV[1] kind: 'f' (a family) or 'u' (a user)   ARGV[2] its id
-- ARGV[3] when, ms (the instance's clock, as the tokens' iat it is
-- compared with)   ARGV[4] how long an entry matters, ms
-- Returns the new entry's id.
local id = redis.call('XADD', KEYS[1], '*', ARGV[1], ARGV[2], 'at', ARGV[3])
local ms = tonumber(string.match(id, '^(%d+)'))
redis.call('XTRIM', KEYS[1], 'MINID', ms - tonumber(ARGV[4]))
return id
