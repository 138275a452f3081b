--#include bloom
local sbits, kk, adding = tonumber(shard_bits), tonumber(k), add == '1'
if adding then bloom_alloc(shard0, sbits, size) end
return bloom_check(shard0, sbits, kk, ARGV, positions, (#ARGV - positions + 1) / kk, adding)
