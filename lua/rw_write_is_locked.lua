-- ReadWriteLock write isLocked (docs/PROTOCOL.md §5.7).
-- KEYS[1]  N, the lock hash
-- Returns  1 if N is in mode "write", else 0.
if redis.call('hget', KEYS[1], 'mode') == 'write' then
    return 1
end
return 0
