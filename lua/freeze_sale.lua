-- Freezes or unfreezes a voucher's sale for a reconcile, fenced: the
-- voucher's hash remembers the largest fencing token a reconcile has
-- written with, and a reconcile holding a smaller one (its lock expired
-- while it was paused, and another reconcile took over) is refused, so it
-- can neither pause a sale another reconcile has rebuilt nor unpause one
-- another reconcile is rebuilding. Idempotent: run again, it does the same.
--
-- KEYS[1]  seckill:voucher:{id}  hash {stock, begin, end, frozen, epoch, fence, reconciled}
-- ARGV[1]  the caller's fencing token; 0 for a caller without one (never refused)
-- ARGV[2]  "1" freeze, "0" unfreeze
--
-- Returns 1 done, -1 refused (a newer reconcile's token is there).
local fence = tonumber(ARGV[1])
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if fence > 0 and fence < seen then
  return -1
end
if fence > seen then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1])
end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'frozen', 1)
else
  redis.call('HDEL', KEYS[1], 'frozen')
end
return 1
