-- Fragment placed after args.lua and count.lua in the RPermitExpirableSemaphore
-- scripts (see src/connection/script.rs).
-- id_arg(i)  ARGV[i], a permit id: 16 bytes (Redisson >= 3.17 writes permit ids
--            as raw 16 bytes, docs/PROTOCOL.md §7.2).
-- id_args(i)  id_arg of ARGV[i] and of every argument after it.
-- reclaim(available, timeouts, channel, now, publish_cmd, limit)
--            Redisson's "reclaim expired" step R(limit) (§7.2): the permits of
--            the zset `timeouts` whose expiry score is at most `now` (at most
--            `limit` of them; all if `limit` is nil) are removed from it and
--            given back to the count `available`; if that count is then above
--            zero it is published on `channel` with the command `publish_cmd`.
--            Members of any form (16 bytes or older 32-character hex text) are
--            reclaimed alike. The caller checks `available` with count_of first.
-- KEYS, ARGV none of its own: the helpers take what they read.
-- Returns    nothing.
local function id_arg(i)
    local v = ARGV[i]
    if v == nil or #v ~= 16 then
        bad_arg(i, 'a permit id of 16 bytes')
    end
    return v
end

local function id_args(first)
    for i = first, #ARGV do
        id_arg(i)
    end
end

local function reclaim(available, timeouts, channel, now, publish_cmd, limit)
    local expired
    if limit == nil then
        expired = redis.call('zrangebyscore', timeouts, 0, now)
    else
        expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, limit)
    end
    if #expired == 0 then
        return
    end
    -- ZREM in slices: unpack() of a very long list would overflow Lua's stack.
    for first = 1, #expired, 1000 do
        redis.call('zrem', timeouts, unpack(expired, first, math.min(first + 999, #expired)))
    end
    local count = redis.call('incrby', available, int_text(#expired))
    if count > 0 then
        publish(publish_cmd, channel, int_text(count))
    end
end
