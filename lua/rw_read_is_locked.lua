-- ReadWriteLock read isLocked (docs/PROTOCOL.md §5.7).
-- KEYS[1]  N, the lock hash
-- Returns  1 if N is in mode "read", or in mode "write" with more fields than
--          mode and the writer (the writer also holds read locks); else 0.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' then
    return 1
end
if mode == 'write' and redis.call('hlen', KEYS[1]) > 2 then
    return 1
end
return 0
