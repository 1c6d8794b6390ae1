-- RSemaphore release(n) (docs/PROTOCOL.md §7.1): INCRBY N n, publish the new count;
-- made safe to retry by this crate's permit latch. Runs after args.lua and count.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  semaphore channel, redisson_sc:{N}
-- KEYS[3]  permit latch, redisson_sc_latch:{N}:<32 hex id>: "1" while the
--          acquisition it names holds its permits, "0" once they were given back
-- ARGV[1]  permits n, 1..2147483647
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[3]  TTL of the permit latch in milliseconds, 1..3155760000000
-- ARGV[4]  mode: "0" release (unless the latch says these permits were already
--          given back: a retry), "1" undo an acquisition whose outcome is unknown
--          (only if the latch says it took its permits)
-- Returns  the new count of N when the permits were given back (N incremented,
--          the count published, the latch set to "0"); nil when nothing was done
--          (a retry of a release that ran, or an undo of an acquisition that took
--          nothing). An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE error if
--          N is not an integer string (count.lua), before anything is written; a
--          NOPERM error, before anything is written, if the user's ACL forbids a
--          call it may make (args.lua).
permits_arg(1)
publish_arg(2)
ms_arg(3)
local undo = flag_arg(4) == '1'
permitted(ARGV[2], {'incrby', KEYS[1], 'publish', KEYS[2], 'set', KEYS[3]})
local latch = redis.call('get', KEYS[3])
if latch == '0' or (undo and latch ~= '1') then
    return nil
end
count_of(KEYS[1])
local count = redis.call('incrby', KEYS[1], ARGV[1])
publish(ARGV[2], KEYS[2], int_text(count))
redis.call('set', KEYS[3], '0', 'px', ARGV[3])
return count
