-- Puts a voucher's rebuilt sale state in place and unfreezes it: the last
-- step of a reconcile, whose buyers were written to a key of their own
-- beforehand. Running it twice changes nothing more (the second finds no
-- rebuilt buyers to move).
--
-- KEYS[1]  seckill:voucher:{id}         hash {stock, begin, end, frozen, epoch}
-- KEYS[2]  seckill:buyers:{id}
-- KEYS[3]  seckill:buyers-rebuilt:{id}  the rebuilt buyers
-- KEYS[4]  seckill:pending:{id}
-- KEYS[5]  seckill:pending-at:{id}
-- ARGV[1]  stock
-- ARGV[2]  begin, ms
-- ARGV[3]  end, ms
-- ARGV[4]  "1" when there are no buyers at all
-- ARGV[5]  this Redis's replication id: the state is now built under it
--
-- Returns 1.
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[2])
elseif ARGV[4] == '1' then
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3], 'epoch', ARGV[5])
redis.call('HDEL', KEYS[1], 'frozen')
for i = 1, #KEYS do
  redis.call('PERSIST', KEYS[i])
end
return 1
