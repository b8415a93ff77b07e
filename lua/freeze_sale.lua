-- Freezes or unfreezes a voucher's sale for a reconcile, fenced: the
-- voucher's hash remembers the largest fencing token a reconcile has
-- written with, and a reconcile holding a smaller one (its lock expired
-- while it was paused, and another reconcile took over) is refused, so it
-- can neither pause a sale another reconcile has rebuilt nor unpause one
-- another reconcile is rebuilding. Idempotent: run again, it does the same.
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  VOUCHER {fence, frozen}
-- ARGV[1]  the caller's fencing token; 0 for a caller without one (never refused)
-- ARGV[2]  "1" freeze, "0" unfreeze
--
-- Returns 1 done, -1 refused (a newer reconcile's token is there).
local fence = tonumber(ARGV[1])
local seen = tonumber(redis.call('HGET', VOUCHER, 'fence') or '0')
if fence > 0 and fence < seen then
  return -1
end
if fence > seen then
  redis.call('HSET', VOUCHER, 'fence', ARGV[1])
end
if ARGV[2] == '1' then
  redis.call('HSET', VOUCHER, 'frozen', 1)
else
  redis.call('HDEL', VOUCHER, 'frozen')
end
return 1
