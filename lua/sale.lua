-- The prelude of every script of a sale's state, loaded in front of each
-- (lua.go) after server.lua: the one order of the keys they all receive,
-- and the helpers they share. gate.Keys.list builds the keys in this order, all under the
-- voucher's hash tag; docs/design.md has the table of who writes what.
--
-- A sale of N > 1 buckets has one such key set per bucket, under the
-- bucket's tag in place of {id} (gate/buckets.go); each script runs on one.
--
-- KEYS[1]  seckill:voucher:{id}     hash {stock, begin, end, frozen, epoch, fence, reconciled, buckets, given, received, draw, drawn, drawfence, seed}
-- KEYS[2]  seckill:buyers:{id}      hash user id -> order id
-- KEYS[3]  seckill:pending:{id}     hash order id -> "userId:acceptedMs[:traceparent]"
-- KEYS[4]  seckill:pending-at:{id}  zset order id by acceptedMs
-- KEYS[5]  seckill:changes:{id}     hash stock change id -> stock after it
-- KEYS[6]  seckill:settled:{id}     hash "o:<order id>" -> status, "u:<user id>" -> failed order id
-- KEYS[7]  seckill:transfers:{id}   hash transfer id -> "receiver:units:donor gen:receiver gen:ms"
-- KEYS[8..] a script's own keys, named in its header
local VOUCHER, BUYERS, PENDING, PENDING_AT, CHANGES, SETTLED, TRANSFERS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]

-- persist_all makes the sale's keys live again (a retired sale brought
-- back), the changes excepted: they keep their own memory's expiry.
local function persist_all()
  for _, k in ipairs({VOUCHER, BUYERS, PENDING, PENDING_AT, SETTLED, TRANSFERS}) do
    redis.call('PERSIST', k)
  end
end

