-- Fair lock forceUnlock (PROTOCOL.md §4.7).
-- KEYS[1]  N, the lock hash
-- KEYS[2]  Q, redisson_lock_queue:{N}
-- KEYS[3]  Z, redisson_lock_timeout:{N}
-- KEYS[4]  channel base, redisson_lock__channel:{N}
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  now, the caller's epoch milliseconds
-- ARGV[3]  publish command, "PUBLISH" or "SPUBLISH"
-- Returns  1 if N existed and was deleted (the queue head is sent `0`), else 0.
local now = tonumber(ARGV[2])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline == nil or deadline > now then break end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
if redis.call('del', KEYS[1]) == 1 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
    end
    return 1
end
return 0
