-- The prelude of the scripts that read the server they run on, loaded in
-- front of each (lua.go): a sale's (after it, sale.lua) and the id lease.

-- now_ms is the server's clock: one clock for every instance that calls.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- replid is the replication id of the server running the script: on
-- Redis Cluster, the master that owns the slot of the script's keys.
-- Redis draws a new one on every restart and every promotion of a replica
-- (redisconn.ReplicationID reads the same field from Go).
local function replid()
  return string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')
end

