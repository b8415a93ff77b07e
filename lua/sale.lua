-- The prelude of every script of a sale's state, loaded in front of each
-- (lua.go) after server.lua: the one order of the keys they all receive,
-- the gate's outcomes, and the helpers they share. salestate.Keys.List
-- builds the keys in this order, all under the voucher's hash tag;
-- docs/design.md has the table of who writes what.
--
-- A sale of N > 1 buckets has one such key set per bucket, under the
-- bucket's tag in place of {id} (salestate/layout.go); each script runs on one.
--
-- KEYS[1]  seckill:voucher:{id}     hash {stock, begin, end, frozen, epoch, fence, reconciled, buckets, given, received, draw, drawn, drawfence, seed}
-- KEYS[2]  seckill:buyers:{id}      hash user id -> order id
-- KEYS[3]  seckill:pending:{id}     hash order id -> "userId:acceptedMs[:traceparent]"
-- KEYS[4]  seckill:pending-at:{id}  zset order id by acceptedMs
-- KEYS[5]  seckill:changes:{id}     hash stock change id -> stock after it
-- KEYS[6]  seckill:settled:{id}     hash "o:<order id>" -> status, "u:<user id>" -> failed order id
-- KEYS[7]  seckill:transfers:{id}   hash transfer id -> "receiver:units:donor gen:receiver gen:ms"
-- KEYS[SHARED + 1..] a script's own keys, named in its header
--
-- The names in the one order, declared once here and once in Go
-- (salestate.Keys.List): TestSharedKeysAgreeWithThePrelude reads both.
-- A script names its own keys from KEYS[SHARED + 1], so that a shared key
-- added here renumbers none of them.
local SHARED = 7
local VOUCHER, BUYERS, PENDING, PENDING_AT, CHANGES, SETTLED, TRANSFERS = unpack(KEYS, 1, SHARED)

-- The gate's answer to an attempt (seckill.lua), by name: declared once
-- here and once in Go (salestate.Outcome), and
-- TestOutcomesAgreeWithThePrelude fails when the two drift.
local OUTCOME = {
  ACCEPTED = 0, UNKNOWN_VOUCHER = 1, NOT_STARTED = 2, ENDED = 3, ALREADY_BOUGHT = 4, SOLD_OUT = 5,
  PAUSED = 6, OTHER_LAYOUT = 7, ENTERED = 8, DRAWING = 9, NOT_AN_ENTRANT = 10,
}

-- persist_all makes the sale's keys live again (a retired sale brought
-- back), the changes excepted: they keep their own memory's expiry.
local function persist_all()
  for _, k in ipairs({VOUCHER, BUYERS, PENDING, PENDING_AT, SETTLED, TRANSFERS}) do
    redis.call('PERSIST', k)
  end
end

