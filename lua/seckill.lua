-- The flash-sale gate: one atomic decision per order attempt, for a batch
-- of attempts on one bucket at once. Every key belongs to one voucher and
-- carries its hash tag, so the script runs on Redis Cluster.
--
-- A batch is what concurrent buyers of one bucket sent while the previous
-- batch was in flight (gate/tries.go): the fixed cost of a call (the
-- dispatch, the voucher's fields, the clock, the replication id, one write
-- per key) is paid once for all of them, and each attempt costs only its
-- arguments and its share of the variadic writes. The attempts are decided
-- in the order given, each exactly as it would be alone.
--
-- A decision is idempotent by the order id: a client that sends the same
-- attempt again (go-redis re-sends a command whose reply timed out) gets
-- the first decision back, not "already bought" for its own order.
--
-- KEYS     the sale's keys (sale.lua); reads VOUCHER's stock, begin, end,
--          frozen, epoch, buckets and draw fields, BUYERS, and PENDING for
--          an attempt that repeats an accepted one
-- KEYS[SHARED + 1]  seckill:entrants:{id}  hash user id -> order id: a draw's entries
-- Writes:  VOUCHER {stock}, BUYERS, PENDING (the reservation, with the
--          traceparent when there is one), PENDING_AT, ENTRANTS
-- ARGV[1]  how many stock buckets the caller takes the sale to have: a
--          bucket that records another number answers OTHER_LAYOUT. For the
--          draw's admissions, "1:<fence>": the drawer's fencing token
--          (draw.lua), which lets the entrants it names through while the
--          draw is made, and no one else
-- Then the attempts, three arguments each: the user id, the order id, and
-- the W3C traceparent of the buyer's request ("" when untraced), kept with
-- the reservation so that a republished order links back to the request
-- that took it.
--
-- A sale is stamped with the replication id of the server its state was
-- built under. Under another one (a restart, a restore, a failover: on
-- Redis Cluster, of the master that owns this voucher's slot) it may miss
-- acknowledged writes — a lost unit taken would be sold twice — so no unit
-- is taken until the sale is reconciled. The id is the server's own, read
-- here, once per batch and only when a unit is about to be taken: a
-- caller's copy lags a failover, and the refusals a crowd gets after the
-- stock is gone (most attempts) need not pay for INFO. A refusal read from
-- a state that lost writes stands until the reconcile that follows: lost
-- writes are units taken and buyers recorded, which make no refusal; only
-- a restock lost in the last second before a crash makes a "sold out" that
-- the reconcile lifts.
--
-- Returns four numbers per attempt, in the attempts' order: {outcome,
-- stock left, ms, order id}, the outcome one of OUTCOME (sale.lua):
-- ACCEPTED (one unit taken, buyer and reservation recorded; ms is when it
-- was accepted); UNKNOWN_VOUCHER; NOT_STARTED; ENDED; ALREADY_BOUGHT
-- (order id is the buyer's order); SOLD_OUT; PAUSED (frozen while its
-- state is rebuilt from MySQL, or built under another replication id than
-- this server's and not yet reconciled: nothing taken); OTHER_LAYOUT (the
-- sale has another number of buckets than the caller thinks: stock left
-- is that number, and nothing is taken: the caller asks the right
-- bucket). ms is the server's clock otherwise. With N > 1, SOLD_OUT is
-- this bucket's: the caller looks at the others. ENTERED in the sale's
-- draw (ms is when the draw is made, order id the entry's: the order it
-- becomes if drawn; nothing taken); DRAWING: the draw is being made, and
-- the buyer did not enter it (nothing taken); to a drawer, its token is
-- not the draw's. NOT_AN_ENTRANT (to the drawer only): no entry of this
-- buyer under this order id here, nothing taken.
--
-- A sale with a draw (VOUCHER's draw field, the admission window in ms)
-- takes no order in its window's first draw ms: an attempt there is an
-- entry, one per buyer. From the window's end until the draw is made
-- (drawn), only the drawer takes units, for the entrants in the draw's
-- order; after it, the sale is first-come on what is left.
local tries = (#ARGV - 1) / 3
local ENTRANTS = KEYS[SHARED + 1]
local want, fence = string.match(ARGV[1], '^(%d+):?(%d*)$')
local out = {}
local function answer(outcome, stock, ms, id)
  out[#out + 1] = outcome
  out[#out + 1] = stock
  out[#out + 1] = ms
  out[#out + 1] = id
end
local function all(outcome, stock)
  for _ = 1, tries do
    answer(outcome, stock, 0, 0)
  end
  return out
end

local v = redis.call('HMGET', VOUCHER, 'stock', 'begin', 'end', 'frozen', 'epoch', 'buckets', 'draw', 'drawn', 'drawfence')
-- A bucket that is not there (lost with its master) is an unknown voucher,
-- as a sale of one bucket is: the order-writer's check rebuilds it.
local n = tonumber(v[6] or '1')
if (v[1] or v[6]) and n ~= tonumber(want) then
  return all(OUTCOME.OTHER_LAYOUT, n)
end
if not v[1] then
  return all(OUTCOME.UNKNOWN_VOUCHER, 0)
end
-- The server's clock, not the caller's: one clock for every API instance.
local now = now_ms()
local stock = tonumber(v[1])
local users = {}
for i = 1, tries do
  users[i] = ARGV[3 * i - 1]
end
local bought = redis.call('HMGET', BUYERS, unpack(users))
local paused = v[4] and true or false
local early, late = now < tonumber(v[2]), now >= tonumber(v[3])
-- The draw, while it is not made: its entries, then the drawer's turn.
local drawing = v[7] and not v[8]
local drawAt, entries, entered, admitting = 0, {}, {}, false
if drawing then
  drawAt = tonumber(v[2]) + tonumber(v[7])
  entered = redis.call('HMGET', ENTRANTS, unpack(users))
  admitting = fence ~= '' and fence == v[9] and now >= drawAt
  if admitting then
    late = false -- a draw made late still serves its entrants
  end
end
if fence ~= '' and not admitting then
  -- A drawer whose token is not the draw's, or a draw made already: a
  -- drawer paused past its lease takes nothing for anyone.
  return all(OUTCOME.DRAWING, stock)
end
local seen = {} -- user id -> entry's order id, for a user twice in one batch
local stale -- the state's replication id is not the server's
local taken = {} -- user id -> order id, for a user twice in one batch
local buyers, pending, at = {}, {}, {}
local before = stock
for i = 1, tries do
  local user, id, traceparent = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local b = taken[user] or bought[i]
  if b == id then
    local ms = now
    if not taken[user] then
      local r = redis.call('HGET', PENDING, id)
      ms = r and tonumber(string.match(r, '^%d+:(%d+)')) or now
    end
    answer(OUTCOME.ACCEPTED, stock, ms, b)
  elseif paused then
    answer(OUTCOME.PAUSED, stock, now, 0)
  elseif early then
    answer(OUTCOME.NOT_STARTED, stock, now, 0)
  elseif late then
    answer(OUTCOME.ENDED, stock, now, 0)
  elseif b then
    answer(OUTCOME.ALREADY_BOUGHT, stock, now, b)
  elseif drawing and not admitting then
    local e = seen[user] or entered[i]
    if e then
      answer(OUTCOME.ENTERED, stock, drawAt, e)
    elseif now < drawAt then
      seen[user] = id
      entries[#entries + 1] = user
      entries[#entries + 1] = id
      answer(OUTCOME.ENTERED, stock, drawAt, id)
    else
      answer(OUTCOME.DRAWING, stock, now, 0)
    end
  elseif admitting and (seen[user] or entered[i]) ~= id then
    answer(OUTCOME.NOT_AN_ENTRANT, stock, now, 0)
  elseif stock <= 0 then
    answer(OUTCOME.SOLD_OUT, 0, now, 0)
  else
    if stale == nil then
      stale = v[5] and v[5] ~= replid() or false
    end
    if stale then
      answer(OUTCOME.PAUSED, stock, now, 0)
    else
      stock = stock - 1
      taken[user] = id
      buyers[#buyers + 1] = user
      buyers[#buyers + 1] = id
      local reservation = user .. ':' .. now
      if traceparent ~= '' then
        reservation = reservation .. ':' .. traceparent
      end
      pending[#pending + 1] = id
      pending[#pending + 1] = reservation
      at[#at + 1] = now
      at[#at + 1] = id
      answer(OUTCOME.ACCEPTED, stock, now, id)
    end
  end
end
if stock ~= before then
  redis.call('HINCRBY', VOUCHER, 'stock', stock - before)
  redis.call('HSET', BUYERS, unpack(buyers))
  redis.call('HSET', PENDING, unpack(pending))
  redis.call('ZADD', PENDING_AT, unpack(at))
end
if #entries > 0 then
  redis.call('HSET', ENTRANTS, unpack(entries))
end
return out
