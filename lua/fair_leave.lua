-- Fair lock acquireFailed: a waiter gives up and leaves the queue (docs/PROTOCOL.md §4.5).
-- Runs after args.lua.
-- KEYS[1]  Q, redisson_lock_queue:{N}
-- KEYS[2]  Z, redisson_lock_timeout:{N}
-- KEYS[3]  N, the lock hash (addition, see below)
-- KEYS[4]  channel base, redisson_lock__channel:{N} (addition)
-- ARGV[1]  owner field "<clientId>:<ownerId>" of the leaving waiter, non-empty
-- ARGV[2]  the thread-wait time it enqueued with, in milliseconds, 0..3155760000000
--          (0: a wait below 1 ms, or a fair_lock_wait_timeout of 0)
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH" (addition)
-- Returns  nothing. Idempotent. Beyond Redisson: if the waiter leaving was the head
--          and the lock is free, the new head is sent `0` on its channel, since an
--          unlock message may have gone to the waiter that left. An INVALID_ARGUMENT
--          error, before anything is written, if an argument is out of range; a NOPERM
--          error, before anything is written, if the user's ACL forbids a call it may
--          make (args.lua).
text_arg(1)
local wait = ms0_arg(2)
publish_arg(3)
permitted(ARGV[3], {'zincrby', KEYS[2], 'zrem', KEYS[2], 'lrem', KEYS[1], 'exists', KEYS[3],
    'lindex', KEYS[1], 'publish', KEYS[4] .. ':x'})
local queue = redis.call('lrange', KEYS[1], 0, -1)
local position = #queue + 1
for i = 1, #queue do
    if queue[i] == ARGV[1] then
        position = i
        break
    end
end
for i = position + 1, #queue do
    redis.call('zincrby', KEYS[2], -wait, queue[i])
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
if position == 1 and redis.call('exists', KEYS[3]) == 0 then
    local head = redis.call('lindex', KEYS[1], 0)
    if head ~= false then
        publish(ARGV[3], KEYS[4] .. ':' .. head, 0)
    end
end
return nil
