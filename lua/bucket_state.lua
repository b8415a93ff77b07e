-- One bucket's state as the movers read it (gate/transfer.go), and the
-- stock changes and audits: what it holds, whether it may take part in a
-- move or a "sold out", and its window.
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  nothing
--
-- Returns {stock or false (no such bucket), given, received, frozen (1 or
-- 0), generation (reconciled, "" when never rebuilt), begin ms, end ms,
-- suspect}. Suspect is 1 when the bucket was built under another
-- replication id than its server's: it may have lost writes (units sold,
-- units deposited), so its count is no evidence of "sold out", it gives no
-- units and takes none until it is reconciled.
local v = redis.call('HMGET', VOUCHER, 'stock', 'given', 'received', 'frozen', 'reconciled', 'begin', 'end', 'epoch')
local suspect = 0
if v[1] and v[8] and v[8] ~= replid() then
  suspect = 1
end
local frozen = 0
if v[4] then
  frozen = 1
end
return {v[1] or false, tonumber(v[2] or '0'), tonumber(v[3] or '0'), frozen, v[5] or '', tonumber(v[6] or '0'),
  tonumber(v[7] or '0'), suspect}
