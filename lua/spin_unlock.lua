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
local replay = redis.call('get', KEYS[2])
if replay ~= false then
    return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 0, 'px', ARGV[3])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[2], 1, 'px', ARGV[3])
return 1
