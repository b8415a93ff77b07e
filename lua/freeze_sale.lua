-- Freezes or unfreezes a voucher's sale for a reconcile, fenced: the
-- voucher's hash remembers the largest fencing token a reconcile has
-- written with, and a reconcile holding a smaller one (its lock expired
-- while it was paused, and another reconcile took over) is refused, so it
-- can neither pause a sale another reconcile has rebuilt nor unpause one
-- another reconcile is rebuilding. Idempotent: run again, it does the same.
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  VOUCHER {fence, frozen}, and its expiry when it holds no sale;
--          frozen is when it was frozen, ms
-- ARGV[1]  the caller's fencing token; 0 for a caller without one (never refused)
-- ARGV[2]  "1" freeze, "0" unfreeze
-- ARGV[3]  how long a hash that holds no sale (no stock: a reconcile of a
--          voucher that turned out to have none) keeps its fence once
--          unfrozen, ms: longer than a paused reconcile's rebuilt buyers
--          live, after which its last step changes nothing anyway
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
  -- When, so that a freeze no reconcile finished (its process died part
  -- way) shows as stale to the order-writer's checks.
  redis.call('HSET', VOUCHER, 'frozen', now_ms())
else
  redis.call('HDEL', VOUCHER, 'frozen')
  if redis.call('HEXISTS', VOUCHER, 'stock') == 0 then
    -- Not a sale: the fence alone, which must not stay for ever (every
    -- other script takes a hash without stock for no sale).
    redis.call('PEXPIRE', VOUCHER, ARGV[3])
  end
end
return 1
