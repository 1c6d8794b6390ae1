-- RPermitExpirableSemaphore getLeaseTime(id) (docs/PROTOCOL.md §7.2). Runs after
-- args.lua, count.lua and pes_reclaim.lua (the reclaim step writes).
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  Z, the timeout zset {N}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{N}
-- ARGV[1]  the permit id, 16 bytes
-- ARGV[2]  the never-expires sentinel, 922337203685477
-- ARGV[3]  now, epoch ms of the sending client
-- ARGV[4]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  after reclaiming every expired permit: -2 if the id is not in Z; -1
--          if it never expires; else its remaining lease, score - now, in ms.
--          An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE error if N is
--          not an integer string (count.lua) or Z not a zset, before anything
--          is written; a NOPERM error, before anything is written, if the user's
--          ACL forbids a call it may make (args.lua).
id_arg(1)
local never = epoch_ms_arg(2)
local now = epoch_ms_arg(3)
publish_arg(4)
permitted(ARGV[4], {'zrem', KEYS[2], 'incrby', KEYS[1], 'publish', KEYS[3],
    'zscore', KEYS[2]})
count_of(KEYS[1])
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4], nil)
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if expiry == false then
    return -2
end
expiry = tonumber(expiry)
if expiry == never then
    return -1
end
return expiry - now
