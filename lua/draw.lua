-- The steps of a sale's draw that are not the gate's (seckill.lua takes
-- the entrants' units): the drawer's turn begins, and ends.
--
-- KEYS     the sale's keys (sale.lua)
-- Writes:  VOUCHER {drawfence, seed, drawn}
-- ARGV[1]  "begin" or "done"
-- ARGV[2]  the drawer's fencing token (its lease's)
-- ARGV[3]  begin: the draw's seed, hex, as MySQL keeps it
--
-- begin: the token becomes the draw's, unless a larger one was seen (a
-- newer drawer took over while this one was paused), and the seed is kept
-- beside the window for anyone who checks the draw. Only once the window
-- has ended by this server's clock, the one the gate takes entries by: the
-- entrants read after it are all there will be. done: the draw is made,
-- and the sale first-come from now on; only under the draw's token.
--
-- Returns {1, 0} done or begun; {2, drawn ms} the draw was already made;
-- {-1, 0} no such sale, or not a draw; {-2, the draw's token} the token is
-- stale; {-3, the window's end, ms} the window has not ended.
local v = redis.call('HMGET', VOUCHER, 'draw', 'drawn', 'drawfence', 'begin')
if not v[1] then
  return {-1, 0}
end
if v[2] then
  return {2, tonumber(v[2])}
end
local cur, fence = tonumber(v[3] or '0'), tonumber(ARGV[2])
if ARGV[1] == 'begin' then
  if fence < cur then
    return {-2, cur}
  end
  local at = tonumber(v[4]) + tonumber(v[1])
  if now_ms() < at then
    return {-3, at}
  end
  redis.call('HSET', VOUCHER, 'drawfence', ARGV[2], 'seed', ARGV[3])
  return {1, 0}
end
if fence ~= cur then
  return {-2, cur}
end
redis.call('HSET', VOUCHER, 'drawn', now_ms())
return {1, 0}
