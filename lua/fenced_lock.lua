-- Fenced lock: acquire or re-enter and take a fencing token (docs/PROTOCOL.md §6.2,
-- Redisson's token-returning variant). Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  token counter, redisson_lock_token:{N} (string, no TTL, survives unlock)
-- ARGV[1]  lease in milliseconds, 1..3155760000000
-- ARGV[2]  owner field "<clientId>:<ownerId>", non-empty
-- Returns  {count, token} when acquired or re-entered: the owner's hold count after
--          it (1: taken afresh) and the token, taken every time: the server's clock
--          in microseconds since the epoch (TIME) when the counter is missing or
--          below it, written to the counter; else INCR of the counter (as Java's
--          Redisson does). The TTL as lock.lua sets it. Otherwise PTTL of N in
--          milliseconds. An INVALID_ARGUMENT error, before anything is written, if
--          an argument is out of range; a NOPERM error, before anything is written, if
--          the user's ACL forbids a call it may make (args.lua); a WRONGTYPE error,
--          with nothing written, if the counter is not a number.
-- The clock is read before the writes: replicate the writes, not the script (the
-- default from Redis 5 on, the only mode from 7; asked for here for a 6.2 set to
-- lua-replicate-commands no).
if redis.replicate_commands then
    redis.replicate_commands()
end
ms_arg(1)
text_arg(2)
permitted(nil, {'get', KEYS[2], 'set', KEYS[2], 'incr', KEYS[2], 'hincrby', KEYS[1],
    'pttl', KEYS[1], 'pexpire', KEYS[1]})

local function wrong_counter()
    return redis.error_reply('WRONGTYPE fencing token ' .. KEYS[2] .. ' is not a counter')
end

if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local last = redis.pcall('get', KEYS[2])
    if type(last) == 'table' then
        return wrong_counter()
    end
    local clock = redis.call('time')
    local stamp = clock[1] .. string.format('%06d', tonumber(clock[2]))
    local token
    -- Integer text of at most 18 characters is exact as a Lua number and far from
    -- the 64-bit limits; anything else is left to INCR, which refuses what is not
    -- a 64-bit integer.
    if not last or (string.find(last, '^%-?%d+$') and #last <= 18
            and tonumber(last) < tonumber(stamp)) then
        redis.call('set', KEYS[2], stamp)
        token = tonumber(stamp)
    else
        token = redis.pcall('incr', KEYS[2])
        if type(token) == 'table' then
            return wrong_counter()
        end
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    lengthen(KEYS[1], ARGV[1])
    if count > 1 then
        track(KEYS[1])
    end
    return {count, token}
end
return redis.call('pttl', KEYS[1])
