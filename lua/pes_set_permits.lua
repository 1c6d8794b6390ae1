-- RPermitExpirableSemaphore setPermits(p) (docs/PROTOCOL.md §7.2): make the total
-- (available + acquired) p. Runs after args.lua and count.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  semaphore channel, redisson_sc:{N}
-- KEYS[3]  Z, the timeout zset {N}:timeout
-- ARGV[1]  total permits p, 0..2147483647
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  the available count afterwards: if N did not exist it is set to p and
--          p published; else, if GET N + ZCOUNT Z 0 +inf differs from p, N is
--          incremented by the difference and p published. An INVALID_ARGUMENT
--          error (args.lua), or a WRONGTYPE error if N is not an integer string
--          (count.lua) or Z not a zset, before anything is written; a NOPERM
--          error, before anything is written, if the user's ACL forbids a call it
--          may make (args.lua).
local p = permits0_arg(1)
publish_arg(2)
permitted(ARGV[2], {'set', KEYS[1], 'incrby', KEYS[1], 'publish', KEYS[2]})
local available = count_of(KEYS[1])
local acquired = redis.call('zcount', KEYS[3], 0, '+inf')
if available == nil then
    redis.call('set', KEYS[1], ARGV[1])
    publish(ARGV[2], KEYS[2], ARGV[1])
    return p
end
local total = available + acquired
if total ~= p then
    available = redis.call('incrby', KEYS[1], int_text(p - total))
    publish(ARGV[2], KEYS[2], ARGV[1])
end
return available
