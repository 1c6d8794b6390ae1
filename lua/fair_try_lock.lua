-- Fair lock: try once without joining the queue (PROTOCOL.md §4.3, §4.8).
-- KEYS[1]  N, the lock hash
-- KEYS[2]  Q, redisson_lock_queue:{N}
-- KEYS[3]  Z, redisson_lock_timeout:{N}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<clientId>:<ownerId>"
-- ARGV[3]  now, the caller's epoch milliseconds
-- ARGV[4]  thread-wait time in milliseconds (to shift the remaining deadlines)
-- ARGV[5]  optional: error text; when given, re-entry is refused with it (non-reentrant fair lock)
-- Returns  nil when acquired or re-entered, else 1 (never enqueues).
local now = tonumber(ARGV[3])
local wait = tonumber(ARGV[4])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline == nil or deadline > now then break end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 and
    (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    local waiters = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #waiters do
        redis.call('zincrby', KEYS[3], -wait, waiters[i])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[5] then
        return redis.error_reply(ARGV[5])
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return 1
