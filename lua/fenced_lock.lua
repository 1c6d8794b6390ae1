-- Fenced lock: acquire or re-enter and take a fencing token (docs/PROTOCOL.md §6.2,
-- Redisson's token-returning variant). Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  token counter, redisson_lock_token:{N} (string, no TTL, survives unlock)
-- ARGV[1]  lease in milliseconds, 1..3155760000000
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- Returns  {count, token} when acquired or re-entered: the owner's hold count after
--          it (1: taken afresh) and the token (INCR of the counter, every time); the
--          TTL as lock.lua sets it. Otherwise PTTL of N in milliseconds. An
--          INVALID_ARGUMENT error, before anything is written, if an argument is
--          out of range (args.lua); a WRONGTYPE error, with nothing written, if the
--          counter is not a number.
ms_arg(1)
text_arg(2)
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = redis.pcall('incr', KEYS[2])
    if type(token) == 'table' then
        return redis.error_reply('WRONGTYPE fencing token ' .. KEYS[2] .. ' is not a counter')
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    lengthen(KEYS[1], ARGV[1])
    return {count, token}
end
return redis.call('pttl', KEYS[1])
