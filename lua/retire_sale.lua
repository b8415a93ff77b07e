-- Retires a voucher's sale once it has ended and every accepted order is
-- settled: its keys get an expiry (they have none while the sale runs, so
-- that an eviction policy limited to keys with a TTL never takes them), and
-- the caller drops the voucher from the relay's active set.
--
-- KEYS     the sale's keys (sale.lua), then
-- KEYS[SHARED + 1]  seckill:entrants:{id}  a draw's entries (MySQL keeps the
--          entrants of record once the draw began)
-- Writes:  PEXPIRE on every key that has no expiry
-- ARGV[1]  how long the retired keys are kept, ms
--
-- Returns 1 retired now (or before: the keys already expire); 0 still on
-- sale, not started, with orders pending, or with a draw not made yet (its
-- drawers away past the end: its entrants are still to be served); -1 no
-- such sale.
local v = redis.call('HMGET', VOUCHER, 'end', 'draw', 'drawn')
if not v[1] then
  return -1
end
if now_ms() < tonumber(v[1]) or redis.call('HLEN', PENDING) > 0 or v[2] and not v[3] then
  return 0
end
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) == -1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
end
return 1
