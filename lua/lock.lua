-- RLock acquire or re-enter (docs/PROTOCOL.md §2.2, Redisson's tryLockInner), and the
-- non-reentrant lock's acquire (§6.3, Redisson 4.7). Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- ARGV[1]  lease in milliseconds (PEXPIRE value), 1..3155760000000
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- ARGV[3]  optional: error text; when given, re-entry is refused with it
--          (non-reentrant lock, §6.3)
-- Returns  {count} when acquired or re-entered: the owner's hold count after it (1:
--          taken afresh); the TTL is the lease on a fresh take and max(PTTL, lease)
--          on re-entry (never shortened). Otherwise PTTL of N in milliseconds (-1 if
--          someone removed its TTL). An INVALID_ARGUMENT error, before anything is
--          written, if an argument is out of range; a NOPERM error, before anything
--          is written, if the user's ACL forbids a call it may make (args.lua).
ms_arg(1)
text_arg(2)
permitted(nil, {'hincrby', KEYS[1], 'pttl', KEYS[1], 'pexpire', KEYS[1]})
if redis.call('exists', KEYS[1]) == 0 or holds(KEYS[1], ARGV[2], ARGV[3]) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    lengthen(KEYS[1], ARGV[1])
    if count > 1 then
        track(KEYS[1])
    end
    return {count}
end
return redis.call('pttl', KEYS[1])
