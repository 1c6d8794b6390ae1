-- Spin lock unlock (docs/PROTOCOL.md §6.1): like RLock's, but publishes nothing.
-- Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  latch key, redisson_unlock_latch:{N}:<32 hex request id>
-- ARGV[1]  lease in milliseconds to keep when the hold count stays above zero,
--          1..3155760000000
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[3]  latch TTL in milliseconds, 1..3155760000000
-- Returns  nil if the owner does not hold N; 0 if still held; 1 if released. An
--          INVALID_ARGUMENT error, before anything is written, if an argument is
--          out of range (args.lua).
ms_arg(1)
text_arg(2)
ms_arg(3)
return replayed(KEYS[2]) or release_hold(KEYS[1], ARGV[2], ARGV[1], KEYS[2], ARGV[3], function()
    redis.call('del', KEYS[1])
end)
