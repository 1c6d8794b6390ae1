-- Redisson's RPermitExpirableSemaphore updateLeaseTime(id, lease) for one id or
-- many at once: `update_lease_time`, and the renewal of a client's watchdog
-- permits of one semaphore (docs/PROTOCOL.md §7.2, §7.6). Runs after args.lua,
-- count.lua and pes_reclaim.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  Z, the timeout zset {N}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{N}
-- ARGV[1]  the new expiry, epoch ms (now + lease)
-- ARGV[2]  now, epoch ms of the sending client
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[4…] the permit ids, 16 bytes each; at least one
-- Returns  after reclaiming every expired permit, one flag per id, in order: 1
--          if the id is in Z (its score set to ARGV[1]), else 0 (released by
--          someone, or expired and reclaimed). An INVALID_ARGUMENT error
--          (args.lua), or a WRONGTYPE error if N is not an integer string
--          (count.lua) or Z not a zset, before anything is written; a NOPERM
--          error, before anything is written, if the user's ACL forbids a call it
--          may make (args.lua).
epoch_ms_arg(1)
epoch_ms_arg(2)
publish_arg(3)
if #ARGV < 4 then
    bad_arg(4, 'at least one permit id')
end
id_args(4)
permitted(ARGV[3], {'zrem', KEYS[2], 'incrby', KEYS[1], 'publish', KEYS[3],
    'zscore', KEYS[2], 'zadd', KEYS[2]})
count_of(KEYS[1])
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], nil)
local flags = {}
for i = 4, #ARGV do
    if redis.call('zscore', KEYS[2], ARGV[i]) == false then
        flags[#flags + 1] = 0
    else
        redis.call('zadd', KEYS[2], ARGV[1], ARGV[i])
        flags[#flags + 1] = 1
    end
end
return flags
