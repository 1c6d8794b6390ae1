-- RSemaphore tryAcquire(n) (docs/PROTOCOL.md §7.1), plus this crate's permit latch.
-- Runs after args.lua and count.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  permit latch, redisson_sc_latch:{N}:<32 hex id>, one per acquisition:
--          it records that this acquisition took its permits, so that an
--          acquisition whose reply was lost can be undone exactly
--          (semaphore_release.lua with mode "1")
-- ARGV[1]  permits n, 1..2147483647
-- ARGV[2]  TTL of the permit latch in milliseconds, 1..3155760000000
-- Returns  1 when acquired (N decremented by n, the latch set to "1");
--          0 when N is absent or holds fewer than n permits (nothing written).
--          An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE error if N is
--          not an integer string (count.lua), before anything is written; a
--          NOPERM error, before anything is written, if the user's ACL forbids a
--          call it may make (args.lua).
local n = permits_arg(1)
ms_arg(2)
permitted(nil, {'decrby', KEYS[1], 'set', KEYS[2]})
local available = count_of(KEYS[1])
if available ~= nil and available >= n then
    redis.call('decrby', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], '1', 'px', ARGV[2])
    return 1
end
return 0
