-- RPermitExpirableSemaphore availablePermits / getPermits / acquiredPermits
-- (docs/PROTOCOL.md §7.2): the reclaim step, then the counts, in one script. Runs
-- after args.lua, count.lua and pes_reclaim.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  Z, the timeout zset {N}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{N}
-- ARGV[1]  now, epoch ms of the sending client
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  {available, acquired}: GET N (0 if absent) and ZCOUNT Z 0 +inf, after
--          every expired permit was reclaimed. An INVALID_ARGUMENT error
--          (args.lua), or a WRONGTYPE error if N is not an integer string
--          (count.lua) or Z not a zset, before anything is written; a NOPERM
--          error, before anything is written, if the user's ACL forbids a call it
--          may make (args.lua).
epoch_ms_arg(1)
publish_arg(2)
permitted(ARGV[2], {'zrem', KEYS[2], 'incrby', KEYS[1], 'publish', KEYS[3],
    'get', KEYS[1], 'zcount', KEYS[2]})
count_of(KEYS[1])
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], nil)
return {count_of(KEYS[1]) or 0, redis.call('zcount', KEYS[2], 0, '+inf')}
