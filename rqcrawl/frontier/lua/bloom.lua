-- Shared by the Bloom filter's own script and the finish step. Shards are
-- KEYS[shard_key0 + shard], each `shard_bits` long but the last, which ends at bit `size`.
-- bloom_alloc creates missing shards at their full length, each in one allocation.
-- bloom_check: `pos` holds k global bit positions for each of `count` URLs from index `first`.
-- Returns per URL 1 when some bit was still clear (the URL is new); with `add`, also sets every
-- bit. The bits go in one BITFIELD per shard (per BITFIELD_OPS bits), not one SETBIT each: a
-- page's links cost one command instead of k per link, in the same order (a URL twice in a
-- batch is new only once).
-- The bit filter keeps the count of its set bits in the last key (KEYS[#KEYS], bloom.BloomFilter
-- .script_keys): what each add changes is counted there, so that reading the fill is a GET,
-- not a BITCOUNT of the whole filter (11 ms of a blocked Redis for the default 18 MB); a
-- filter made before the count was kept is counted once, by its first add since.
-- shard_bits 0 means the native filter (bloom.NativeBloomFilter): KEYS[shard_key0] is one
-- RedisBloom filter, `size` is "error_rate capacity" for its BF.RESERVE, k is 1 and `pos`
-- holds one fingerprint per URL, checked and added by BF.MADD (1: it was not there).
--#include args
local BITFIELD_OPS = 512  -- 4 arguments each, well within Lua's unpack limit (8000)

local function bloom_alloc(shard_key0, shard_bits, size)
  if shard_bits == 0 then
    if redis.call('EXISTS', KEYS[shard_key0]) == 0 then
      local rate, capacity = string.match(size, '(%S+) (%S+)')
      redis.call('BF.RESERVE', KEYS[shard_key0], rate, capacity)
    end
    return
  end
  local bits = tonumber(size)
  local shards = math.ceil(bits / shard_bits)
  -- all shards are created in one call, the last one last: it stands for them all; with the
  -- count of set bits (as always but once), in one read
  if redis.call('EXISTS', KEYS[shard_key0 + shards - 1], KEYS[#KEYS]) == 2 then return end
  if redis.call('EXISTS', KEYS[shard_key0 + shards - 1]) == 1 then
    if redis.call('EXISTS', KEYS[#KEYS]) == 0 then
      local set = 0
      for shard = 0, shards - 1 do set = set + redis.call('BITCOUNT', KEYS[shard_key0 + shard]) end
      redis.call('SET', KEYS[#KEYS], set)
    end
    return
  end
  for shard = 0, shards - 1 do
    local key = KEYS[shard_key0 + shard]
    if redis.call('EXISTS', key) == 0 then
      redis.call('SETBIT', key, math.min(shard_bits, bits - shard * shard_bits) - 1, 0)
    end
  end
  redis.call('SET', KEYS[#KEYS], 0)
end

local function bloom_check(shard_key0, shard_bits, k, pos, first, count, add)
  if shard_bits == 0 then
    if count == 0 then return {} end
    local items = {unpack(pos, first, first + count - 1)}
    if add then return redis.call('BF.MADD', KEYS[shard_key0], unpack(items)) end
    local seen = redis.call('BF.MEXISTS', KEYS[shard_key0], unpack(items))
    for i = 1, count do seen[i] = 1 - seen[i] end
    return seen
  end
  -- (the offsets go as text, see lua/args.lua: a shard-0 position is its own offset)
  local op, old, groups = add and 'SET' or 'GET', {}, {}
  local function flush(shard, g)
    local got = redis.call('BITFIELD', KEYS[shard_key0 + shard], unpack(g.args, 1, g.n))
    for j = 1, g.ops do old[g.at[j]] = got[j] end
    groups[shard] = nil
  end
  for i = first, first + count * k - 1 do
    local offset = pos[i]
    local p = tonumber(offset)
    local shard = math.floor(p / shard_bits)
    if shard > 0 then offset = int(p - shard * shard_bits) end
    local g = groups[shard] or {at = {}, args = {}, ops = 0, n = 0}
    groups[shard] = g
    local a, n = g.args, g.n
    g.ops = g.ops + 1
    g.at[g.ops] = i
    a[n + 1], a[n + 2], a[n + 3] = op, 'u1', offset
    if add then a[n + 4], g.n = '1', n + 4 else g.n = n + 3 end
    if g.ops == BITFIELD_OPS then flush(shard, g) end
  end
  for shard, g in pairs(groups) do flush(shard, g) end
  local new, cleared = {}, 0
  for u = 1, count do
    new[u] = 0
    for i = first + (u - 1) * k, first + u * k - 1 do
      if old[i] == 0 then new[u], cleared = 1, cleared + 1 end
    end
  end
  if add and cleared > 0 then redis.call('INCRBY', KEYS[#KEYS], int(cleared)) end
  return new
end
