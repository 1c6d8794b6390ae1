-- RLock acquire or re-enter (PROTOCOL.md §2.2, Redisson's tryLockInner).
-- Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- ARGV[1]  lease in milliseconds (PEXPIRE value), 1..3155760000000
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- Returns  nil when acquired or re-entered (count + 1, TTL reset to the lease);
--          otherwise PTTL of N in milliseconds (-1 if someone removed its TTL). An
--          INVALID_ARGUMENT error, before anything is written, if an argument is
--          out of range (args.lua).
ms_arg(1)
text_arg(2)
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
