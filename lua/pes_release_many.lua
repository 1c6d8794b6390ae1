-- RPermitExpirableSemaphore tryRelease(ids) (docs/PROTOCOL.md §7.2, Redisson >= 3.23.4).
-- Runs after args.lua, count.lua and pes_reclaim.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  semaphore channel, redisson_sc:{N}
-- KEYS[3]  Z, the timeout zset {N}:timeout
-- ARGV[1]  how many ids follow ARGV[3], 1..2147483647
-- ARGV[2]  now, epoch ms of the sending client
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[4…] the permit ids, 16 bytes each
-- Returns  0, with nothing written, if any id is not in Z or has expired; else,
--          after reclaiming every expired permit, the ids are removed from Z, N
--          is incremented by the number removed r, r is published (the count
--          released, not the new total, as Redisson does), and the reply is r.
--          An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE error if N is
--          not an integer string (count.lua) or Z not a zset, before anything
--          is written; a NOPERM error, before anything is written, if the user's
--          ACL forbids a call it may make (args.lua).
local n = permits_arg(1)
if #ARGV ~= 3 + n then
    bad_arg(1, 'the number of permit ids after ARGV[3] (' .. (#ARGV - 3) .. ')')
end
local now = epoch_ms_arg(2)
publish_arg(3)
id_args(4)
permitted(ARGV[3], {'zrem', KEYS[3], 'incrby', KEYS[1], 'publish', KEYS[2]})
count_of(KEYS[1])
for i = 4, #ARGV do
    local expiry = redis.call('zscore', KEYS[3], ARGV[i])
    if expiry == false or tonumber(expiry) <= now then
        return 0
    end
end
reclaim(KEYS[1], KEYS[3], KEYS[2], ARGV[2], ARGV[3], nil)
local removed = 0
for first = 4, #ARGV, 1000 do
    removed = removed + redis.call('zrem', KEYS[3], unpack(ARGV, first, math.min(first + 999, #ARGV)))
end
redis.call('incrby', KEYS[1], int_text(removed))
publish(ARGV[3], KEYS[2], int_text(removed))
return removed
