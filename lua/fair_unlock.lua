-- Fair lock unlock with the idempotency latch (PROTOCOL.md §4.6). Runs after fair_purge.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  Q, redisson_lock_queue:{N}
-- KEYS[3]  Z, redisson_lock_timeout:{N}
-- KEYS[4]  channel base, redisson_lock__channel:{N} (the head's channel is base:owner)
-- KEYS[5]  latch key, redisson_unlock_latch:{N}:<32 hex request id>
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  lease in milliseconds to keep when the hold count stays above zero
-- ARGV[3]  owner field "<clientId>:<ownerId>"
-- ARGV[4]  now, the caller's epoch milliseconds
-- ARGV[5]  publish command, "PUBLISH" or "SPUBLISH"
-- ARGV[6]  latch TTL in milliseconds
-- Returns  nil if the owner does not hold N; 0 if still held; 1 if released (the queue
--          head is sent `0`). Deviation, read only by this crate: on a lock that no
--          longer exists the head is still woken, but the reply is nil (Redisson replies
--          1), so a holder whose lock expired learns it.
local replay = redis.call('get', KEYS[5])
if replay ~= false then
    return tonumber(replay)
end
local now = tonumber(ARGV[4])
purge_stale_head(KEYS[2], KEYS[3], now)
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], 0, 'px', ARGV[6])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
