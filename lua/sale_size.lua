-- What the order-writer's sale checks compare with MySQL, read at once on
-- the server that holds the sale: its stock, the replication id it was
-- built under, how many buyers it records, and the server's replication id
-- now (on Redis Cluster, of the master that owns the voucher's slot).
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  nothing
--
-- Returns {stock or false, epoch or false, buyers, replication id}. A key
-- of the type an earlier release wrote fails with WRONGTYPE.
local v = redis.call('HMGET', VOUCHER, 'stock', 'epoch')
return {v[1], v[2], redis.call('HLEN', BUYERS), replid()}
