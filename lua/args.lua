-- Fragment placed first in every script that writes (see src/script.rs):
-- the publish helper, and argument checks a script runs before its first write, so that a bad
-- argument fails the whole call with nothing written (PEXPIRE, SET PX or a
-- publish command failing half-way would leave partial state behind).
-- ms_arg(i)         ARGV[i] as a number: milliseconds, a decimal integer in
--                   [1, 3155760000000] (1 ms to 100 years).
-- ms0_arg(i)        the same, 0 allowed: [0, 3155760000000].
-- epoch_ms_arg(i)   ARGV[i] as a number: epoch milliseconds, a decimal integer
--                   in [1, 2^53 - 1].
-- count_arg(i)      ARGV[i] as a number: how many of the arguments after it
--                   belong to it, a decimal integer in [1, #ARGV - i].
-- text_arg(i)       ARGV[i], a non-empty string (owner fields, messages).
-- flag_arg(i)       ARGV[i], exactly "0" or "1".
-- publish_arg(i)    ARGV[i], exactly "PUBLISH", "SPUBLISH" or "BOTH".
-- permits_arg(i)    ARGV[i] as a number: a permit count, a decimal integer in
--                   [1, 2147483647] (Java's int).
-- permits0_arg(i)   the same, 0 allowed: [0, 2147483647].
-- delta_arg(i)      ARGV[i] as a number: a change of permits, a decimal integer
--                   in [-2147483648, 2147483647], with "-" before a negative one.
-- positive_arg(i)   ARGV[i] as a number: a decimal integer in [1, 2^53 - 1].
-- bad_arg(i, what)  refuse ARGV[i]; it must be `what`.
-- fail(message)     end the script at once, from any depth, with the error reply
--                   `message` (its first word is the error code), writing nothing
--                   more. Redis before 7 cannot report an error table raised by
--                   `error()` (its handler concatenates it as text), so every
--                   script that starts with this fragment runs its body through
--                   run_body (src/script.rs adds the call), which catches the
--                   failure and returns it as the script's reply; any other error
--                   (a failed redis.call) is raised again as it was.
-- run_body(body)    body(), with fail() turned into the error reply.
-- publish(cmd, channel, message)  publish by `cmd` (a checked publish_arg):
--                   PUBLISH, SPUBLISH, or BOTH (the two, for clusters whose
--                   clients disagree on sharded pub/sub).
-- The unlock steps every lock kind's unlock shares (docs/PROTOCOL.md §2.3, §2.4);
-- each script still states its whole wire contract in its own header:
-- replayed(latch)   the reply an unlock already gave under the latch key `latch`
--                   (a resend of it), or nil.
-- latched(latch, ttl, reply)  record `reply` (0: still held, 1: released) under
--                   the latch key for `ttl` ms, and return it.
-- take_hold(hash, field, lease, latch, ttl)  take one of `field`'s holds of the
--                   hash away: nil if it holds none; 0 if it still holds some (the
--                   hash then lives `lease` ms; latched); 1 if that was its last
--                   (its field stays at 0: the caller releases and latches 1).
-- Integers are decimal digits only, no sign (delta_arg's may have "-"), no leading zero, as Redis parses
-- PEXPIRE and SET PX values; each range stays exact in a Lua double.
-- KEYS, ARGV  none of its own: the helpers read the script's ARGV.
-- Returns     nothing. A failed check ends the script with the error reply
--             INVALID_ARGUMENT ARGV[<i>] must be <what>, got "<value>"
--             (the value cut to 40 bytes, control bytes as '?'; got nothing when
--             absent), the same on every server (Redis 6.2, 7, Valkey).
local FAILED = 'redisson_lock_failed'

local function fail(message)
    error({ [FAILED] = message }, 0)
end

local function run_body(body)
    local ok, result = pcall(body)
    if ok then
        return result
    end
    if type(result) == 'table' and result[FAILED] ~= nil then
        return redis.error_reply(result[FAILED])
    end
    error(result, 0)
end

local function bad_arg(i, what)
    local got = ARGV[i]
    if got == nil then
        got = 'nothing'
    else
        got = '"' .. string.gsub(string.sub(got, 1, 40), '%c', '?') .. '"'
    end
    fail('INVALID_ARGUMENT ARGV[' .. i .. '] must be ' .. what .. ', got ' .. got)
end

local function int_arg(i, min, max, what)
    local v = ARGV[i]
    if v ~= nil and (v == '0' or string.find(v, '^[1-9]%d*$')) then
        local n = tonumber(v)
        if n >= min and n <= max then
            return n
        end
    end
    bad_arg(i, what)
end

local function ms_arg(i)
    return int_arg(i, 1, 3155760000000, 'an integer of milliseconds in [1, 3155760000000]')
end

local function ms0_arg(i)
    return int_arg(i, 0, 3155760000000, 'an integer of milliseconds in [0, 3155760000000]')
end

local function epoch_ms_arg(i)
    return int_arg(i, 1, 9007199254740991, 'epoch milliseconds in [1, 9007199254740991]')
end

local function count_arg(i)
    return int_arg(i, 1, #ARGV - i, 'a count in [1, ' .. (#ARGV - i) .. '] of the arguments after it')
end

local function text_arg(i)
    local v = ARGV[i]
    if v == nil or v == '' then
        bad_arg(i, 'a non-empty string')
    end
    return v
end

local function flag_arg(i)
    local v = ARGV[i]
    if v ~= '0' and v ~= '1' then
        bad_arg(i, '"0" or "1"')
    end
    return v
end

local function publish_arg(i)
    local v = ARGV[i]
    if v ~= 'PUBLISH' and v ~= 'SPUBLISH' and v ~= 'BOTH' then
        bad_arg(i, 'PUBLISH, SPUBLISH or BOTH')
    end
    return v
end

local function publish(cmd, channel, message)
    if cmd == 'BOTH' then
        redis.call('PUBLISH', channel, message)
        redis.call('SPUBLISH', channel, message)
    else
        redis.call(cmd, channel, message)
    end
end

local function replayed(latch)
    local reply = redis.call('get', latch)
    if reply == false then
        return nil
    end
    return tonumber(reply)
end

local function latched(latch, ttl, reply)
    redis.call('set', latch, reply, 'px', ttl)
    return reply
end

local function take_hold(hash, field, lease, latch, ttl)
    if redis.call('hexists', hash, field) == 0 then
        return nil
    end
    if redis.call('hincrby', hash, field, -1) > 0 then
        redis.call('pexpire', hash, lease)
        return latched(latch, ttl, 0)
    end
    return 1
end

local function permits_arg(i)
    return int_arg(i, 1, 2147483647, 'a permit count in [1, 2147483647]')
end

local function permits0_arg(i)
    return int_arg(i, 0, 2147483647, 'a permit count in [0, 2147483647]')
end

local function delta_arg(i)
    local v = ARGV[i]
    if v ~= nil and (v == '0' or string.find(v, '^%-?[1-9]%d*$')) then
        local n = tonumber(v)
        if n >= -2147483648 and n <= 2147483647 then
            return n
        end
    end
    bad_arg(i, 'a permit change in [-2147483648, 2147483647]')
end

local function positive_arg(i)
    return int_arg(i, 1, 9007199254740991, 'an integer in [1, 9007199254740991]')
end
