-- Puts a voucher's rebuilt sale state in place and unfreezes it: the last
-- step of a reconcile, whose buyers were written to a key of its own
-- beforehand. A bucket of a sale in several stays frozen: the caller
-- unfreezes the buckets once every one is rebuilt, so that a reconcile that
-- stops part way leaves no bucket selling beside buckets not yet rebuilt
-- (whose net stock would no longer add up to the sale's).
--
-- Idempotent by the reconcile's id: sent again (go-redis re-sends a command
-- whose reply timed out) after the first run unfroze the sale and orders
-- were taken, it changes nothing, rather than put the plan's stock back
-- over them. Fenced: a reconcile whose fencing token is below the largest
-- one the voucher has seen (its lock expired while it was paused and a
-- newer reconcile ran) is refused, its rebuilt buyers dropped.
--
-- KEYS     the sale's keys (sale.lua), then
-- KEYS[SHARED + 1]  seckill:buyers-rebuilt:{id}:<reconcile id>  this reconcile's rebuilt buyers
-- Writes:  VOUCHER {stock, begin, end, epoch, reconciled, fence, frozen,
--          buckets, given, received, draw} (frozen deleted in a sale of one bucket), BUYERS (renamed from KEYS[SHARED + 1]), and
--          deletes TRANSFERS; PERSIST on the others
-- ARGV[1]  stock
-- ARGV[2]  begin, ms
-- ARGV[3]  end, ms
-- ARGV[4]  "1" when there are no buyers at all
-- ARGV[5]  the reconcile's id
-- ARGV[6]  its fencing token; 0 for a reconcile without one (never refused)
-- ARGV[7]  how many buckets the sale has: 1 writes no bucket fields
-- ARGV[8]  a draw sale's window, ms (0 for a first-come sale): a state
--          rebuilt from nothing is a draw again, not first-come
--
-- A bucket of a sale in several starts afresh: nothing given or received,
-- no transfer recorded; the reconcile's id is its generation, so a deposit
-- of units taken before the reconcile is void (bucket_deposit.lua): MySQL's
-- stock counted them.
--
-- The state is stamped with the replication id of the server that runs
-- this, read here: on Redis Cluster, the master that owns the voucher's
-- slot, whatever a caller last knew of it.
--
-- Returns 1 in place (now, or by an earlier run of this reconcile); -1
-- refused: a newer reconcile's token is there; -2 the rebuilt buyers are
-- missing (expired while the reconcile was paused): nothing changed.
local rebuilt = KEYS[SHARED + 1]
if redis.call('HGET', VOUCHER, 'reconciled') == ARGV[5] then
  return 1
end
local fence = tonumber(ARGV[6])
local seen = tonumber(redis.call('HGET', VOUCHER, 'fence') or '0')
if fence > 0 and fence < seen then
  redis.call('DEL', rebuilt)
  return -1
end
if redis.call('EXISTS', rebuilt) == 1 then
  redis.call('RENAME', rebuilt, BUYERS)
elseif ARGV[4] == '1' then
  redis.call('DEL', BUYERS)
else
  return -2
end
redis.call('HSET', VOUCHER, 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3], 'epoch', replid(),
  'reconciled', ARGV[5], 'fence', math.max(fence, seen))
if ARGV[7] == '1' then
  redis.call('HDEL', VOUCHER, 'frozen')
else
  redis.call('HSET', VOUCHER, 'buckets', ARGV[7], 'given', 0, 'received', 0)
end
if ARGV[8] ~= '0' then
  redis.call('HSET', VOUCHER, 'draw', ARGV[8])
end
redis.call('DEL', TRANSFERS)
-- A reconcile can bring a retired sale back: every key of the sale is live
-- again (the changes keep their own memory's expiry).
persist_all()
return 1
