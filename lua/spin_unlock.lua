-- Spin lock unlock (docs/PROTOCOL.md §6.1): like RLock's, but publishes nothing.
-- Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  latch key, redisson_unlock_latch:{N}:<32 hex request id>
-- ARGV[1]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[2]  latch TTL in milliseconds, 1..3155760000000
-- Returns  nil if the owner does not hold N; 0 if still held (TTL kept); 1 if
--          released. An INVALID_ARGUMENT error, before anything is written, if an
--          argument is out of range; a NOPERM error, before anything is written, if
--          the user's ACL forbids a call it may make (args.lua).
text_arg(1)
ms_arg(2)
permitted(nil, {'hincrby', KEYS[1], 'pttl', KEYS[1], 'set', KEYS[2], 'del', KEYS[1]})
return replayed(KEYS[2]) or release_hold(KEYS[1], ARGV[1], KEYS[2], ARGV[2], function()
    redis.call('del', KEYS[1])
end)
