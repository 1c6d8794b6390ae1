-- RPermitExpirableSemaphore tryRelease(id) (docs/PROTOCOL.md §7.2). Runs after
-- args.lua, count.lua and pes_reclaim.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  semaphore channel, redisson_sc:{N}
-- KEYS[3]  Z, the timeout zset {N}:timeout
-- ARGV[1]  the permit id, 16 bytes
-- ARGV[2]  permits to give back, "1"
-- ARGV[3]  now, epoch ms of the sending client
-- ARGV[4]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  -1 if the id is not in Z (nothing written); else the id is removed
--          from Z, N incremented and the new count published, and the reply is
--          1, or 0 if the permit had already expired (given back all the same).
--          An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE error if N is
--          not an integer string (count.lua) or Z not a zset, before anything
--          is written; a NOPERM error, before anything is written, if the user's
--          ACL forbids a call it may make (args.lua).
id_arg(1)
permits_arg(2)
local now = epoch_ms_arg(3)
publish_arg(4)
permitted(ARGV[4], {'zrem', KEYS[3], 'incrby', KEYS[1], 'publish', KEYS[2]})
count_of(KEYS[1])
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if expiry == false or redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then
    return -1
end
local count = redis.call('incrby', KEYS[1], ARGV[2])
publish(ARGV[4], KEYS[2], int_text(count))
if tonumber(expiry) <= now then
    return 0
end
return 1
