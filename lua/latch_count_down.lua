-- RCountDownLatch countDown() (docs/PROTOCOL.md §7.3). Runs after args.lua and count.lua.
-- KEYS[1]  N, the latch (string: the count)
-- KEYS[2]  latch channel, redisson_countdownlatch__channel__{N}
-- ARGV[1]  zero-count message, "0"
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  the count after DECR N: at 0 or below N is deleted, and at exactly 0
--          "0" is published (a latch that did not exist gives -1 and is left
--          absent). An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE error if
--          N is not an integer string (count.lua), before anything is written; a
--          NOPERM error, before anything is written, if the user's ACL forbids a
--          call it may make (args.lua).
flag_arg(1)
publish_arg(2)
permitted(ARGV[2], {'decr', KEYS[1], 'del', KEYS[1], 'publish', KEYS[2]})
count_of(KEYS[1])
local count = redis.call('decr', KEYS[1])
if count <= 0 then
    redis.call('del', KEYS[1])
end
if count == 0 then
    publish(ARGV[2], KEYS[2], ARGV[1])
end
return count
