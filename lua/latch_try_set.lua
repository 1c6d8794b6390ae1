-- RCountDownLatch trySetCount(c) (docs/PROTOCOL.md §7.3). Runs after args.lua and count.lua.
-- KEYS[1]  N, the latch (string: the count)
-- KEYS[2]  latch channel, redisson_countdownlatch__channel__{N}
-- ARGV[1]  new-count message, "1"
-- ARGV[2]  count c, 1..9007199254740991
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  1 if N did not exist: N set to c (no TTL) and "1" published; else 0,
--          nothing written. An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE
--          error if N exists but is not an integer string (count.lua), before
--          anything is written; a NOPERM error, before anything is written, if the
--          user's ACL forbids a call it may make (args.lua).
flag_arg(1)
positive_arg(2)
publish_arg(3)
permitted(ARGV[3], {'set', KEYS[1], 'publish', KEYS[2]})
if count_of(KEYS[1]) ~= nil then
    return 0
end
redis.call('set', KEYS[1], ARGV[2])
publish(ARGV[3], KEYS[2], ARGV[1])
return 1
