-- ReadWriteLock write unlock with the idempotency latch (docs/PROTOCOL.md §5.5, §2.4).
-- Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  channel, redisson_rwlock:{N}
-- KEYS[3]  latch key, redisson_unlock_latch:{N}:<32 hex request id>
-- ARGV[1]  unlock message, "1" (non-empty)
-- ARGV[2]  write field "<clientId>:<ownerId>:write", non-empty
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[4]  latch TTL in milliseconds, 1..3155760000000
-- Returns  nil if N has no mode (message published and latch 1 written anyway, as
--          Redisson does), is held for reading, or not by this writer; 0 if the
--          write count stays above zero (TTL kept); 1 if the write lock was released: N
--          deleted, or, if the writer still holds read locks, downgraded to
--          mode "read". A replay of the same request id returns the first result.
--          An INVALID_ARGUMENT error, before anything is written, if an
--          argument is out of range; a NOPERM error, before anything is written,
--          if the user's ACL forbids a call it may make (args.lua).
-- Deviation from Redisson: the downgrade ALSO publishes "1" (Redisson publishes
-- nothing there), so waiting readers re-check at once instead of sleeping out the
-- TTL. An extra "1" only causes a harmless re-check on Java's side.
text_arg(1)
text_arg(2)
publish_arg(3)
ms_arg(4)
local function unlock()
    if unlock_mode(KEYS[1], ARGV[3], KEYS[2], ARGV[1], KEYS[3], ARGV[4]) ~= 'write' then
        return nil
    end
    return release_hold(KEYS[1], ARGV[2], KEYS[3], ARGV[4], function()
        redis.call('hdel', KEYS[1], ARGV[2])
        if redis.call('hlen', KEYS[1]) == 1 then
            redis.call('del', KEYS[1])
        else
            redis.call('hset', KEYS[1], 'mode', 'read')
            track(KEYS[1])
        end
        publish(ARGV[3], KEYS[2], ARGV[1])
    end)
end
permitted(ARGV[3], {'publish', KEYS[2], 'set', KEYS[3], 'hincrby', KEYS[1], 'hdel', KEYS[1],
    'hlen', KEYS[1], 'del', KEYS[1], 'hset', KEYS[1], 'pttl', KEYS[1]})
return replayed(KEYS[3]) or unlock()
