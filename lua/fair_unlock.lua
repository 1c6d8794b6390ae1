-- Fair lock unlock with the idempotency latch (docs/PROTOCOL.md §4.6). Runs after args.lua
-- and fair_purge.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  Q, redisson_lock_queue:{N}
-- KEYS[3]  Z, redisson_lock_timeout:{N}
-- KEYS[4]  channel base, redisson_lock__channel:{N} (the head's channel is base:owner)
-- KEYS[5]  latch key, redisson_unlock_latch:{N}:<32 hex request id>
-- ARGV[1]  unlock message, "0" (non-empty)
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[3]  now, the caller's epoch milliseconds, 1..2^53-1
-- ARGV[4]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[5]  latch TTL in milliseconds, 1..3155760000000
-- Returns  nil if the owner does not hold N; 0 if still held (TTL kept); 1 if released (the queue
--          head is sent `0`). Deviation, read only by this crate: on a lock that no
--          longer exists the head is still woken, but the reply is nil (Redisson replies
--          1), so a holder whose lock expired learns it. An INVALID_ARGUMENT error,
--          before anything is written, if an argument is out of range; a NOPERM error,
--          before anything is written, if the user's ACL forbids a call it may make
--          (args.lua).
text_arg(1)
text_arg(2)
local now = epoch_ms_arg(3)
publish_arg(4)
ms_arg(5)
local function unlock()
    purge_stale_head(KEYS[2], KEYS[3], now)
    if redis.call('exists', KEYS[1]) == 0 then
        wake_head(KEYS[2], ARGV[4], KEYS[4], ARGV[1])
        return nil
    end
    local released = release_hold(KEYS[1], ARGV[2], KEYS[5], ARGV[5], function()
        redis.call('del', KEYS[1])
    end)
    if released == 1 then
        wake_head(KEYS[2], ARGV[4], KEYS[4], ARGV[1])
    end
    return released
end
permitted(ARGV[4], {'lindex', KEYS[2], 'zscore', KEYS[3], 'zrem', KEYS[3], 'lpop', KEYS[2],
    'exists', KEYS[1], 'publish', KEYS[4] .. ':x', 'hexists', KEYS[1], 'hincrby', KEYS[1],
    'pttl', KEYS[1], 'set', KEYS[5], 'del', KEYS[1]})
return replayed(KEYS[5]) or unlock()
