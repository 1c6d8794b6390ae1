-- RSemaphore drainPermits() (docs/PROTOCOL.md §7.1): SET N 0, which also removes a
-- TTL of N; nothing published. Runs after args.lua and count.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- ARGV     none
-- Returns  the count N held (nothing written if N does not exist: 0). A
--          WRONGTYPE error if N is not an integer string (count.lua), before
--          anything is written; a NOPERM error, before anything is written, if the
--          user's ACL forbids a call it may make (args.lua).
permitted(nil, {'set', KEYS[1]})
local count = count_of(KEYS[1])
if count == nil then
    return 0
end
redis.call('set', KEYS[1], '0')
return count
