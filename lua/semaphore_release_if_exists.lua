-- RSemaphore releaseIfExists(n) (docs/PROTOCOL.md §7.1). Runs after args.lua and count.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  semaphore channel, redisson_sc:{N}
-- ARGV[1]  permits n, 1..2147483647
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  0 if N does not exist (nothing written); else 1: N incremented by n and
--          the new count published. An INVALID_ARGUMENT error (args.lua), or a
--          WRONGTYPE error if N is not an integer string (count.lua), before
--          anything is written; a NOPERM error, before anything is written, if the
--          user's ACL forbids a call it may make (args.lua).
permits_arg(1)
publish_arg(2)
permitted(ARGV[2], {'incrby', KEYS[1], 'publish', KEYS[2]})
if count_of(KEYS[1]) == nil then
    return 0
end
local count = redis.call('incrby', KEYS[1], ARGV[1])
publish(ARGV[2], KEYS[2], int_text(count))
return 1
