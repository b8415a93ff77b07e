-- The gate script as it was before batches: one attempt per call. Kept as
-- the reference that TestGateBatchMatchesOneAttemptAtATime compares the
-- batched script with.
--
-- The flash-sale gate: one atomic decision per order attempt. Every key
-- belongs to one voucher and carries its hash tag, so the script runs on
-- Redis Cluster.
--
-- The decision is idempotent by the order id: a client that sends the same
-- attempt again (go-redis re-sends a command whose reply timed out) gets
-- the first decision back, not "already bought" for its own order.
--
-- KEYS     the sale's keys (sale.lua); reads VOUCHER's stock, begin, end,
--          frozen and epoch
-- Writes:  VOUCHER {stock}, BUYERS, PENDING (the reservation, with the
--          traceparent when there is one), PENDING_AT
-- ARGV[1]  user id
-- ARGV[2]  order id
-- ARGV[3]  the W3C traceparent of the buyer's request, "" when untraced:
--          kept with the reservation, so that a republished order links
--          back to the request that took it
-- ARGV[4]  how many stock buckets the caller takes the sale to have: a
--          bucket that records another number answers OTHER_LAYOUT
--
-- A sale is stamped with the replication id of the server its state was
-- built under. Under another one (a restart, a restore, a failover: on
-- Redis Cluster, of the master that owns this voucher's slot) it may miss
-- acknowledged writes — a lost unit taken would be sold twice — so no unit
-- is taken until the sale is reconciled. The id is the server's own, read
-- here, only when a unit is about to be taken: a caller's copy lags a
-- failover, and the refusals a crowd gets after the stock is gone (most
-- attempts) need not pay for INFO. A refusal read from a state that lost
-- writes stands until the reconcile that follows: lost writes are units
-- taken and buyers recorded, which make no refusal; only a restock lost in
-- the last second before a crash makes a "sold out" that the reconcile
-- lifts.
--
-- Returns {outcome, stock left, ms, order id}. Outcome: 0 accepted (one
-- unit taken, buyer and reservation recorded; ms is when it was accepted);
-- 1 unknown voucher; 2 not started; 3 ended; 4 already bought (order id is
-- the buyer's order); 5 sold out; 6 paused (frozen while its state is
-- rebuilt from MySQL, or built under another replication id than this
-- server's and not yet reconciled: nothing taken); 7 the sale has another
-- number of buckets than the caller thinks (stock left is that number, and
-- nothing is taken: the caller asks the right bucket). ms is the server's
-- clock otherwise. With N > 1, "sold out" is this bucket's: the caller
-- looks at the others.
local v = redis.call('HMGET', VOUCHER, 'stock', 'begin', 'end', 'frozen', 'epoch', 'buckets')
-- A bucket that is not there (lost with its master) is an unknown voucher,
-- as a sale of one bucket is: the order-writer's check rebuilds it.
local n = tonumber(v[6] or '1')
if (v[1] or v[6]) and n ~= tonumber(ARGV[4]) then
  return {OUTCOME.OTHER_LAYOUT, n, 0, 0}
end
if not v[1] then
  return {OUTCOME.UNKNOWN_VOUCHER, 0, 0, 0}
end
-- The server's clock, not the caller's: one clock for every API instance.
local now = now_ms()
local stock = tonumber(v[1])
local bought = redis.call('HGET', BUYERS, ARGV[1])
if bought == ARGV[2] then
  local r = redis.call('HGET', PENDING, ARGV[2])
  local at = r and tonumber(string.match(r, '^%d+:(%d+)')) or now
  return {OUTCOME.ACCEPTED, stock, at, bought}
end
if v[4] then
  return {OUTCOME.PAUSED, stock, now, 0}
end
if now < tonumber(v[2]) then
  return {OUTCOME.NOT_STARTED, stock, now, 0}
end
if now >= tonumber(v[3]) then
  return {OUTCOME.ENDED, stock, now, 0}
end
if bought then
  return {OUTCOME.ALREADY_BOUGHT, stock, now, bought}
end
if stock <= 0 then
  return {OUTCOME.SOLD_OUT, 0, now, 0}
end
if v[5] and v[5] ~= replid() then
  return {OUTCOME.PAUSED, stock, now, 0}
end
redis.call('HINCRBY', VOUCHER, 'stock', -1)
redis.call('HSET', BUYERS, ARGV[1], ARGV[2])
local reservation = ARGV[1] .. ':' .. now
if ARGV[3] and ARGV[3] ~= '' then
  reservation = reservation .. ':' .. ARGV[3]
end
redis.call('HSET', PENDING, ARGV[2], reservation)
redis.call('ZADD', PENDING_AT, now, ARGV[2])
return {OUTCOME.ACCEPTED, stock - 1, now, ARGV[2]}
