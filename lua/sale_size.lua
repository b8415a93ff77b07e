-- What the order-writer's sale checks compare with MySQL, read at once on
-- the server that holds the sale: its stock, the replication id it was
-- built under, how many buyers it records, and the server's replication id
-- now (on Redis Cluster, of the master that owns the voucher's slot).
--
-- KEYS[1]  seckill:voucher:{id}
-- KEYS[2]  seckill:buyers:{id}
--
-- Returns {stock or false, epoch or false, buyers, replication id}. A key
-- of the type an earlier release wrote fails with WRONGTYPE.
local v = redis.call('HMGET', KEYS[1], 'stock', 'epoch')
local buyers = redis.call('HLEN', KEYS[2])
local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')
return {v[1], v[2], buyers, replid}
