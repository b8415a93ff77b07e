-- Sets an item's bits in a Bloom filter kept as a bitmap, but only in a
-- filter that exists: a filter is created whole by its builder (a SET of
-- the bitmap), and a bitmap made by this script alone would claim that
-- every other item is absent.
--
-- KEYS[1]  the filter's bitmap
-- ARGV     the item's bit offsets
--
-- Returns 1 when set, 0 when there is no filter (its builder will read the
-- item from the database).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
for i = 1, #ARGV do
  redis.call('SETBIT', KEYS[1], ARGV[i], 1)
end
return 1
