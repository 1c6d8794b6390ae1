-- ReadWriteLock read unlock with the idempotency latch (docs/PROTOCOL.md §5.3, §2.4).
-- Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  channel, redisson_rwlock:{N}
-- KEYS[3]  timeout prefix of the owner, {N}:<owner>:rwlock_timeout
-- KEYS[4]  key prefix, {N} (N itself if it contains '{')
-- KEYS[5]  latch key, redisson_unlock_latch:{N}:<32 hex request id>
-- ARGV[1]  unlock message, "0" (non-empty)
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[3]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[4]  latch TTL in milliseconds, 1..3155760000000
-- ARGV[5]  optional: how long the owner's remaining read holds need to last, in
--          milliseconds, 1..3155760000000 (the client knows each of its holds' lease)
-- Returns  nil if N has no mode (message published and latch 1 written anyway, as
--          Redisson does) or the owner holds no read lock; 0 if N stays held (held
--          for writing: its TTL kept; held for reading: its TTL set to the longest
--          remaining reader timeout key); 1 if N was deleted and the message
--          published. A replay of the same request id returns the first result from
--          the latch. An INVALID_ARGUMENT error, before anything is written, if an
--          argument is out of range; a NOPERM error, before anything is written, if
--          the user's ACL forbids a call it may make (args.lua).
-- Beyond Redisson: with ARGV[5], the owner's remaining timeout keys live exactly that
-- long (none longer, and its last one that long), whichever of its holds was released;
-- without it, the key that goes (the last, <prefix>:<count + 1>) hands its remaining time
-- on to the one that becomes the last, so that the remaining holds keep at least what
-- they were given. Either way a writer's TTL is never cut to a reader's
-- (docs/PROTOCOL.md §5.3).
text_arg(1)
text_arg(2)
publish_arg(3)
ms_arg(4)
local need = nil
if #ARGV >= 5 then
    need = ms_arg(5)
end
local function unlock()
    local mode = unlock_mode(KEYS[1], ARGV[3], KEYS[2], ARGV[1], KEYS[5], ARGV[4])
    if mode == nil or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
        return nil
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
    local gone = KEYS[3] .. ':' .. (count + 1)
    local left = redis.call('pttl', gone)
    redis.call('del', gone)
    if count == 0 then
        redis.call('hdel', KEYS[1], ARGV[2])
    elseif need ~= nil then
        local longest = 0
        for k = 1, count do
            local key = KEYS[3] .. ':' .. k
            local remain = redis.call('pttl', key)
            if remain > need then
                redis.call('pexpire', key, need)
                remain = need
            end
            longest = math.max(longest, remain)
        end
        if longest < need then
            redis.call('set', KEYS[3] .. ':' .. count, 1, 'px', need)
        end
    elseif left > 0 then
        local last = KEYS[3] .. ':' .. count
        if redis.call('pttl', last) < left then
            redis.call('set', last, 1, 'px', left)
        end
    end
    if redis.call('hlen', KEYS[1]) > 1 then
        if mode == 'write' then
            track(KEYS[1])
            return latched(KEYS[5], ARGV[4], 0)
        end
        -- Every numeric field (every reader): the longest-lived timeout key
        -- decides how long N stays.
        local max_remain = -3
        local fields = redis.call('hgetall', KEYS[1])
        for i = 1, #fields, 2 do
            local held = tonumber(fields[i + 1])
            if held ~= nil then
                for k = held, 1, -1 do
                    local remain = redis.call('pttl', KEYS[4] .. ':' .. fields[i] .. ':rwlock_timeout:' .. k)
                    max_remain = math.max(max_remain, remain)
                end
            end
        end
        if max_remain > 0 then
            redis.call('pexpire', KEYS[1], max_remain)
            track(KEYS[1])
            return latched(KEYS[5], ARGV[4], 0)
        end
    end
    redis.call('del', KEYS[1])
    publish(ARGV[3], KEYS[2], ARGV[1])
    return latched(KEYS[5], ARGV[4], 1)
end
permitted(ARGV[3], {'publish', KEYS[2], 'set', KEYS[5], 'hincrby', KEYS[1],
    'pttl', KEYS[3] .. ':1', 'del', KEYS[3] .. ':1', 'hdel', KEYS[1],
    'pexpire', KEYS[3] .. ':1', 'set', KEYS[3] .. ':1', 'hlen', KEYS[1], 'hgetall', KEYS[1],
    'pttl', KEYS[4] .. ':x:rwlock_timeout:1', 'pexpire', KEYS[1], 'pttl', KEYS[1], 'del', KEYS[1]})
return replayed(KEYS[5]) or unlock()
