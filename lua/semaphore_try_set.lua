-- trySetPermits(p) of RSemaphore and RPermitExpirableSemaphore, and RSemaphore's
-- trySetPermits(p, ttl) (docs/PROTOCOL.md §7.1, §7.2). Runs after args.lua and count.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  semaphore channel, redisson_sc:{N}
-- ARGV[1]  permits p, 0..2147483647
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[3]  optional: TTL of N in milliseconds, 1..3155760000000
-- Returns  1 if N did not exist: N set to p (with PX ttl when given) and p
--          published; else 0, nothing written. An INVALID_ARGUMENT error
--          (args.lua), or a WRONGTYPE error if N is not an integer string
--          (count.lua), before anything is written; a NOPERM error, before
--          anything is written, if the user's ACL forbids a call it may make
--          (args.lua).
permits0_arg(1)
publish_arg(2)
if ARGV[3] ~= nil then
    ms_arg(3)
end
permitted(ARGV[2], {'set', KEYS[1], 'publish', KEYS[2]})
if count_of(KEYS[1]) ~= nil then
    return 0
end
if ARGV[3] ~= nil then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
    redis.call('set', KEYS[1], ARGV[1])
end
publish(ARGV[2], KEYS[2], ARGV[1])
return 1
