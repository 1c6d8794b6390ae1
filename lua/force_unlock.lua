-- RLock forceUnlock, whoever holds it (PROTOCOL.md §2.5).
-- KEYS[1]  N, the lock hash
-- KEYS[2]  unlock channel, redisson_lock__channel:{N}
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  publish command, "PUBLISH" or "SPUBLISH"
-- Returns  1 if N existed and was deleted (message published), else 0.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
