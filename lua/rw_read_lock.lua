-- ReadWriteLock read acquire or re-enter (docs/PROTOCOL.md §5.2). Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  timeout prefix of the owner, {N}:<owner>:rwlock_timeout (suffixName rule)
-- ARGV[1]  lease in milliseconds (PEXPIRE value), 1..3155760000000
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[3]  the same owner's write field "<clientId>:<ownerId>:write", non-empty
-- Returns  {count} when acquired or re-entered: the owner's read count after it (1:
--          its field was absent), a timeout key <prefix>:<count> with the lease, N's
--          TTL at least the lease (max(PTTL, lease)); otherwise PTTL of N in
--          milliseconds (held for writing by someone else).
--          An INVALID_ARGUMENT error, before anything is written, if an
--          argument is out of range; a NOPERM error, before anything is written,
--          if the user's ACL forbids a call it may make (args.lua).
ms_arg(1)
text_arg(2)
text_arg(3)
permitted(nil, {'hset', KEYS[1], 'set', KEYS[2] .. ':1', 'pexpire', KEYS[2] .. ':1',
    'pexpire', KEYS[1], 'hincrby', KEYS[1], 'pttl', KEYS[1]})
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    take_rw(KEYS[1], 'read', ARGV[2])
    redis.call('set', KEYS[2] .. ':1', 1)
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local timeout = KEYS[2] .. ':' .. count
    redis.call('set', timeout, 1)
    redis.call('pexpire', timeout, ARGV[1])
    lengthen(KEYS[1], ARGV[1])
    track(KEYS[1])
    return {count}
end
return redis.call('pttl', KEYS[1])
