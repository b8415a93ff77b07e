-- What the order-writer's sale checks compare with MySQL, read at once on
-- the server that holds the sale: its stock, the replication id it was
-- built under, how many buyers it records, and the server's replication id
-- now (on Redis Cluster, of the master that owns the voucher's slot). The
-- stock of a bucket of a sale in several is its net stock, stock + given -
-- received (gate/transfer.go says why).
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  nothing
--
-- Returns {stock or false, epoch or false, buyers, replication id, ms
-- frozen for (0: not frozen)}. A key of the type an earlier release wrote
-- fails with WRONGTYPE.
local v = redis.call('HMGET', VOUCHER, 'stock', 'epoch', 'given', 'received', 'frozen')
local stock = v[1] and tonumber(v[1]) + tonumber(v[3] or '0') - tonumber(v[4] or '0')
local frozen = 0
if v[5] then
  -- A freeze written before it carried its time ("1") is taken for stale;
  -- one made this millisecond is frozen for 1, not the 0 of "not frozen".
  frozen = math.max(now_ms() - (tonumber(v[5]) or 0), 1)
end
return {stock, v[2], redis.call('HLEN', BUYERS), replid(), frozen}
