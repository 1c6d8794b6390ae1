-- Fair lock: acquire or re-enter, or else join the FIFO queue or just report
-- (docs/PROTOCOL.md §4.2-§4.4, §4.8). Runs after args.lua and fair_purge.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  Q, redisson_lock_queue:{N} (list of waiting owners, head first)
-- KEYS[3]  Z, redisson_lock_timeout:{N} (zset: owner -> epoch-ms deadline)
-- KEYS[4]  channel base, redisson_lock__channel:{N} (the head's channel is base:owner)
-- ARGV[1]  lease in milliseconds, 1..3155760000000
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[3]  thread-wait time in milliseconds (how long a queued waiter is presumed
--          alive; also what an acquisition takes off the other waiters' deadlines),
--          0..3155760000000 (0: a wait below 1 ms, or a fair_lock_wait_timeout of 0)
-- ARGV[4]  now, the caller's epoch milliseconds, 1..2^53-1
-- ARGV[5]  "1" to join the queue when busy (lock, tryLock with a wait: §4.4);
--          "0" to only try (tryLock(): §4.3, never enqueues, replies 1 when busy)
-- ARGV[6]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[7]  optional: error text; when given, re-entry is refused with it
--          (non-reentrant fair lock, §4.8)
-- Returns  {count} when acquired or re-entered: the owner's hold count after it (1:
--          taken afresh; the TTL is the lease, and max(PTTL, lease) on re-entry). When
--          busy and only trying: 1. When busy and queueing, read only by this crate
--          (Redisson's replies differ, §4.4 step 4 and 5; Redis state is changed exactly
--          as Redisson does): the queue is joined first if need be, then
--          * {0, ms}: the lock is free but another waiter is at the head: its turn,
--            which it takes at once, or, if it is dead, its deadline passes in ms (-1:
--            it has none);
--          * ms: how long to sleep at most: the holder's PTTL (-1: no TTL), or the time
--            until the head's deadline when another waiter is at the head and that is
--            sooner, since an unlock wakes only the head and a dead head would otherwise
--            stall the queue (Redisson's waiters spin or sleep out the lease).
--          A queued waiter never sleeps past the holder's lease: its expiry is not
--          announced, and the next head must re-check then. An INVALID_ARGUMENT
--          error, before anything is written, if an argument is out of range; a NOPERM
--          error, before anything is written, if the user's ACL forbids a call it may
--          make (args.lua).
-- Beyond Redisson: when the lock is free but another waiter is at the head, the head is
-- sent 0 on its channel (whatever the mode): a Java Redisson 3.12-3.23 head can be parked
-- without a timeout on a lock whose holder died (§4.4, §11.2), and a live head merely
-- re-checks.
ms_arg(1)
text_arg(2)
local wait = ms0_arg(3)
local now = epoch_ms_arg(4)
flag_arg(5)
publish_arg(6)
permitted(ARGV[6], {'lindex', KEYS[2], 'zscore', KEYS[3], 'zrem', KEYS[3], 'lpop', KEYS[2],
    'exists', KEYS[1], 'exists', KEYS[2], 'zrange', KEYS[3], 'zincrby', KEYS[3],
    'hset', KEYS[1], 'pexpire', KEYS[1], 'hexists', KEYS[1], 'hincrby', KEYS[1],
    'pttl', KEYS[1], 'publish', KEYS[4] .. ':x', 'zadd', KEYS[3], 'rpush', KEYS[2]})
purge_stale_head(KEYS[2], KEYS[3], now)
-- free, and nobody ahead of us: take it, and shift the remaining deadlines
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
    return {1}
end
if holds(KEYS[1], ARGV[2], ARGV[7]) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    lengthen(KEYS[1], ARGV[1])
    track(KEYS[1])
    return {count}
end
if redis.call('exists', KEYS[1]) == 0 then
    wake_head(KEYS[2], ARGV[6], KEYS[4], '0')
end
if ARGV[5] ~= '1' then
    return 1
end
-- join the queue behind the last waiter, with Redisson's deadline
local pttl = redis.call('pttl', KEYS[1])
if redis.call('zscore', KEYS[3], ARGV[2]) == false then
    local last = redis.call('lindex', KEYS[2], -1)
    local ttl = pttl
    if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then
        ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now
    end
    if redis.call('zadd', KEYS[3], ttl + wait + now, ARGV[2]) == 1 then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
end
-- queued: how long to sleep
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false and head ~= ARGV[2] then
    -- a head without a deadline (written by someone else) never expires: -1
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    local until_head = -1
    if deadline ~= nil then until_head = math.max(1, deadline - now) end
    if pttl == -2 then return {0, until_head} end
    if deadline ~= nil and (pttl == -1 or until_head < pttl) then return until_head end
end
return pttl
