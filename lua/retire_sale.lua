-- Retires a voucher's sale once it has ended and every accepted order is
-- settled: its keys get an expiry (they have none while the sale runs, so
-- that an eviction policy limited to keys with a TTL never takes them), and
-- the caller drops the voucher from the relay's active set.
--
-- KEYS[1]  seckill:voucher:{id}     hash {stock, begin, end, frozen, epoch, fence, reconciled}
-- KEYS[2]  seckill:buyers:{id}
-- KEYS[3]  seckill:pending:{id}
-- KEYS[4]  seckill:pending-at:{id}
-- KEYS[5]  seckill:changes:{id}
-- KEYS[6]  seckill:settled:{id}
-- ARGV[1]  how long the retired keys are kept, ms
--
-- Returns 1 retired now (or before: the keys already expire); 0 still on
-- sale, not started, or with orders pending; -1 no such sale.
local e = redis.call('HGET', KEYS[1], 'end')
if not e then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(e) or redis.call('HLEN', KEYS[3]) > 0 then
  return 0
end
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) == -1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
end
return 1
