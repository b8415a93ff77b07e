-- Leases a block of a day's id sequence, stamped with the replication id
-- of the Redis it was leased from. Under a new replication id (a restart,
-- a restore, a failover) the counter may have rolled back below numbers
-- already handed out, or be gone with the rest of the data: the first
-- lease under it (or with no stamp at all) skips a margin first, far more
-- than can be leased in the seconds of writes Redis can lose, so ids are
-- not handed out twice while the sales wait for their reconcile. The
-- margin is small beside the 2^32 numbers of a day.
-- KEYS[2] is KEYS[1] in a hash tag: the same slot on Redis Cluster.
--
-- The replication id is the server's own, read here (server.lua's
-- replid): a caller's copy may
-- still be the old master's for a moment after a failover, and equal to
-- the stamp the promoted replica copied from it. On Redis Cluster it is
-- the id of the master that owns the counter's slot.
--
-- KEYS[1]  id:{kind}:{day}          the day's sequence counter
-- KEYS[2]  {id:{kind}:{day}}:epoch  the replication id of its last lease
-- ARGV[1]  the block size
-- ARGV[2]  "1" to stamp the lease, "" not to
-- ARGV[3]  the margin
--
-- Returns the counter after: the block is (result - block, result].
if ARGV[2] ~= '' then
  local id = replid()
  if redis.call('GET', KEYS[2]) ~= id then
    redis.call('INCRBY', KEYS[1], ARGV[3])
    redis.call('SET', KEYS[2], id)
  end
  redis.call('PERSIST', KEYS[2])
end
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
-- No expiry while it counts: Redis may evict keys that have one
-- (volatile-lru), and an evicted counter would hand out its ids again.
redis.call('PERSIST', KEYS[1])
return v
