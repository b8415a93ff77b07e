-- A sale's window with its server's clock, read together: whoever decides
-- "open" by them (the bot check's paths and challenges) decides by the
-- clock the gate's own scripts read, not by its host's.
--
-- KEYS[1] the voucher's hash (a sale's first bucket's, which holds the
-- window). Returns {begin, end, now} in ms; begin and end are false when
-- the voucher has no sale.
local w = redis.call('HMGET', KEYS[1], 'begin', 'end')
return {w[1], w[2], now_ms()}
