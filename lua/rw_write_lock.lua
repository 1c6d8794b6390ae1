-- ReadWriteLock write acquire or re-enter (docs/PROTOCOL.md §5.4). Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- ARGV[1]  lease in milliseconds, 1..3155760000000
-- ARGV[2]  write field "<clientId>:<ownerId>:write", non-empty
-- Returns  {count} when acquired (count 1, TTL = lease) or re-entered (the count
--          after it; the lease is ADDED to the remaining TTL, as Redisson does);
--          otherwise PTTL of N in milliseconds (held by readers or another writer).
--          An INVALID_ARGUMENT
--          error, before anything is written, if an argument is out of range; a NOPERM
--          error, before anything is written, if the user's ACL forbids a call it may
--          make (args.lua).
ms_arg(1)
text_arg(2)
permitted(nil, {'hset', KEYS[1], 'pexpire', KEYS[1], 'hincrby', KEYS[1], 'pttl', KEYS[1]})
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    take_rw(KEYS[1], 'write', ARGV[2])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local ttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], ttl + tonumber(ARGV[1]))
    track(KEYS[1])
    return {count}
end
return redis.call('pttl', KEYS[1])
