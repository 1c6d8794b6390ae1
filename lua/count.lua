-- Fragment placed after args.lua in the semaphore and count-down latch scripts
-- (see src/connection/script.rs): reading and writing the integer text those keys hold.
-- count_of(key)  the integer the string `key` holds, nil if it does not exist.
--                Raises WRONGTYPE, before anything is written, if `key` holds
--                another Redis type (Redis' own error) or anything but integer
--                text of at most 17 characters (this fragment's error reply
--                "WRONGTYPE <key> does not hold an integer count").
-- int_text(n)    n as decimal integer text, the way Redis writes counts
--                (never "1e+15"; n must be an integer).
-- KEYS, ARGV     none of its own: the helpers take what they read.
-- Returns        nothing.
local function count_of(key)
    local v = redis.call('get', key)
    if v == false then
        return nil
    end
    if #v > 17 or string.find(v, '^%-?%d+$') == nil then
        fail('WRONGTYPE ' .. key .. ' does not hold an integer count')
    end
    return tonumber(v)
end

local function int_text(n)
    return string.format('%d', n)
end
