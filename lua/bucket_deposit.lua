-- The second step of moving stock between buckets: adds the units a take
-- (bucket_take.lua) recorded to this bucket (the receiver).
--
-- Idempotent by the transfer's id, remembered with the stock changes: sent
-- again, by a retry or by the relay's sweep finishing a transfer whose
-- mover died, it adds nothing. A deposit to a receiver whose generation
-- has changed since the mover read it, before the take, is void: a
-- reconcile rebuilt the receiver meanwhile, from MySQL's stock, which
-- counts the units in transit (the donor gets them back if it was not
-- rebuilt too: bucket_refund.lua).
--
-- KEYS     the sale's keys (sale.lua) of the receiver
-- Writes:  VOUCHER {stock, received}, CHANGES (the transfer's id, with the
--          memory's expiry)
-- ARGV[1]  the transfer's id
-- ARGV[2]  units
-- ARGV[3]  the receiver's generation as the mover read it before the take
-- ARGV[4]  how long the transfer's id is remembered, ms
--
-- Returns 1 deposited (now or before); 0 void; -1 no such bucket, -2
-- frozen, or built under another replication id than its server's (it may
-- have lost writes and cannot sell until reconciled): not now, the
-- transfer stays recorded and is tried again.
local id = 't:' .. ARGV[1]
if redis.call('HGET', CHANGES, id) then
  return 1
end
local v = redis.call('HMGET', VOUCHER, 'stock', 'frozen', 'reconciled', 'epoch')
if not v[1] then
  return -1
end
if v[2] or (v[4] and v[4] ~= replid()) then
  return -2
end
if (v[3] or '') ~= ARGV[3] then
  return 0
end
local after = redis.call('HINCRBY', VOUCHER, 'stock', tonumber(ARGV[2]))
redis.call('HINCRBY', VOUCHER, 'received', tonumber(ARGV[2]))
redis.call('HSET', CHANGES, id, after)
redis.call('PEXPIRE', CHANGES, ARGV[4])
return 1
