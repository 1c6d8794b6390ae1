-- Fair lock forceUnlock (docs/PROTOCOL.md §4.7). Runs after args.lua and
-- fair_purge.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  Q, redisson_lock_queue:{N}
-- KEYS[3]  Z, redisson_lock_timeout:{N}
-- KEYS[4]  channel base, redisson_lock__channel:{N}
-- ARGV[1]  unlock message, "0" (non-empty)
-- ARGV[2]  now, the caller's epoch milliseconds, 1..2^53-1
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  1 if N existed and was deleted (the queue head is sent `0`), else 0.
--          An INVALID_ARGUMENT error, before anything is written, if an argument
--          is out of range; a NOPERM error, before anything is written, if the
--          user's ACL forbids a call it may make (args.lua).
text_arg(1)
local now = epoch_ms_arg(2)
publish_arg(3)
permitted(ARGV[3], {'lindex', KEYS[2], 'zscore', KEYS[3], 'zrem', KEYS[3], 'lpop', KEYS[2],
    'del', KEYS[1], 'publish', KEYS[4] .. ':x'})
purge_stale_head(KEYS[2], KEYS[3], now)
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
wake_head(KEYS[2], ARGV[3], KEYS[4], ARGV[1])
return 1
