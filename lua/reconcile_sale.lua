-- Puts a voucher's rebuilt sale state in place and unfreezes it: the last
-- step of a reconcile, whose buyers were written to a key of its own
-- beforehand.
--
-- Idempotent by the reconcile's id: sent again (go-redis re-sends a command
-- whose reply timed out) after the first run unfroze the sale and orders
-- were taken, it changes nothing, rather than put the plan's stock back
-- over them. Fenced: a reconcile whose fencing token is below the largest
-- one the voucher has seen (its lock expired while it was paused and a
-- newer reconcile ran) is refused, its rebuilt buyers dropped.
--
-- KEYS[1]  seckill:voucher:{id}            hash {stock, begin, end, frozen, epoch, fence, reconciled}
-- KEYS[2]  seckill:buyers:{id}
-- KEYS[3]  seckill:buyers-rebuilt:{id}:<reconcile id>  this reconcile's rebuilt buyers
-- KEYS[4]  seckill:pending:{id}
-- KEYS[5]  seckill:pending-at:{id}
-- KEYS[6]  seckill:settled:{id}
-- ARGV[1]  stock
-- ARGV[2]  begin, ms
-- ARGV[3]  end, ms
-- ARGV[4]  "1" when there are no buyers at all
-- ARGV[5]  the reconcile's id
-- ARGV[6]  its fencing token; 0 for a reconcile without one (never refused)
--
-- The state is stamped with the replication id of the server that runs
-- this, read here: on Redis Cluster, the master that owns the voucher's
-- slot, whatever a caller last knew of it.
--
-- Returns 1 in place (now, or by an earlier run of this reconcile); -1
-- refused: a newer reconcile's token is there; -2 the rebuilt buyers are
-- missing (expired while the reconcile was paused): nothing changed.
if redis.call('HGET', KEYS[1], 'reconciled') == ARGV[5] then
  return 1
end
local fence = tonumber(ARGV[6])
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if fence > 0 and fence < seen then
  redis.call('DEL', KEYS[3])
  return -1
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[2])
elseif ARGV[4] == '1' then
  redis.call('DEL', KEYS[2])
else
  return -2
end
local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3], 'epoch', replid,
  'reconciled', ARGV[5], 'fence', math.max(fence, seen))
redis.call('HDEL', KEYS[1], 'frozen')
-- A reconcile can bring a retired sale back: every key of the sale is live
-- again (the changes keep their own memory's expiry).
for _, i in ipairs({1, 2, 4, 5, 6}) do
  redis.call('PERSIST', KEYS[i])
end
return 1
