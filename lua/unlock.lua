-- RLock unlock with the idempotency latch (docs/PROTOCOL.md §2.3, §2.4). Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  unlock channel, redisson_lock__channel:{N}
-- KEYS[3]  latch key, redisson_unlock_latch:{N}:<32 hex request id>
-- ARGV[1]  unlock message, "0" (non-empty)
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[4]  latch TTL in milliseconds, 1..3155760000000
-- Returns  nil if the owner does not hold N; 0 if still held (count decremented, TTL
--          kept); 1 if released (N deleted, message published). A replay of the same
--          request id returns the first result from the latch. An INVALID_ARGUMENT
--          error, before anything is written, if an argument is out of range; a
--          NOPERM error, before anything is written, if the user's ACL forbids a call
--          it may make (args.lua).
text_arg(1)
text_arg(2)
publish_arg(3)
ms_arg(4)
permitted(ARGV[3], {'hincrby', KEYS[1], 'pttl', KEYS[1], 'set', KEYS[3], 'del', KEYS[1],
    'publish', KEYS[2]})
return replayed(KEYS[3]) or release_hold(KEYS[1], ARGV[2], KEYS[3], ARGV[4], function()
    redis.call('del', KEYS[1])
    publish(ARGV[3], KEYS[2], ARGV[1])
end)
