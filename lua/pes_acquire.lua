-- RPermitExpirableSemaphore tryAcquire of n permits (docs/PROTOCOL.md §7.2, Redisson
-- >= 3.23.4). Runs after args.lua, count.lua and pes_reclaim.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  Z, the timeout zset {N}:timeout (member: permit id, score: expiry)
-- KEYS[3]  semaphore channel, redisson_sc:{N}
-- ARGV[1]  permits n, 1..2147483647; exactly n ids follow ARGV[5]
-- ARGV[2]  expiry of the new permits: epoch ms (now + lease), or the sentinel
--          922337203685477 for "never expires"
-- ARGV[3]  now, epoch ms of the sending client
-- ARGV[4]  the never-expires sentinel, 922337203685477
-- ARGV[5]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[6…] the n new permit ids, 16 bytes each
-- Returns  {1, 0} when acquired: after reclaiming up to n expired permits, N
--          decremented by n, each id added to Z with score ARGV[2], and Z given
--          N's TTL if N has one. Otherwise (nothing written but the reclaim)
--          {0, score} with the earliest expiry in Z, or {0, -1} when Z is empty
--          or its earliest permit never expires. An INVALID_ARGUMENT error
--          (args.lua), or a WRONGTYPE error if N is not an integer string
--          (count.lua) or Z not a zset, before anything is written; a NOPERM
--          error, before anything is written, if the user's ACL forbids a call it
--          may make (args.lua).
local n = permits_arg(1)
if #ARGV ~= 5 + n then
    bad_arg(1, 'the number of permit ids after ARGV[5] (' .. (#ARGV - 5) .. ')')
end
epoch_ms_arg(2)
epoch_ms_arg(3)
local never = epoch_ms_arg(4)
publish_arg(5)
id_args(6)
permitted(ARGV[5], {'zrem', KEYS[2], 'incrby', KEYS[1], 'publish', KEYS[3],
    'get', KEYS[1], 'decrby', KEYS[1], 'zadd', KEYS[2], 'pttl', KEYS[1],
    'pexpire', KEYS[2], 'zrange', KEYS[2]})
count_of(KEYS[1])
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[5], n)
local available = count_of(KEYS[1])
if available ~= nil and available >= n then
    redis.call('decrby', KEYS[1], ARGV[1])
    for i = 6, #ARGV do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and tonumber(first[2]) ~= never then
    return {0, tonumber(first[2])}
end
return {0, -1}
