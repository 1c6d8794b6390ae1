-- Fragment placed first in every script that writes (see src/connection/script.rs):
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
--                   run_body (src/connection/script.rs adds the call), which catches the
--                   failure and returns it as the script's reply; any other error
--                   (a failed redis.call) is raised again as it was.
-- run_body(body)    body(), with fail() turned into the error reply.
-- publish(cmd, channel, message)  publish by `cmd` (a checked publish_arg):
--                   PUBLISH, SPUBLISH, or BOTH (the two, for clusters whose
--                   clients disagree on sharded pub/sub).
-- permitted(pub, checks)  refuse, before the script's first write, a call it may make
--                   that the user's ACL forbids: the error reply
--                   NOPERM this user may not run <COMMAND> on <key or channel> (nothing written).
--                   `checks` is a flat list of pairs, a command then the key or channel it
--                   acts on ({'hincrby', KEYS[1], 'publish', KEYS[2]}): every command the
--                   script may run after its first write, on every path, reads included
--                   (a key it names at run time by a name of the same shape). 'publish'
--                   stands for `pub`, the script's checked publish_arg (BOTH: PUBLISH and
--                   SPUBLISH). Redis 7 and Valkey check each pair with redis.acl_check_cmd
--                   (command, key and channel rules). Redis 6.2 has no such check: there
--                   EVAL itself checked the declared keys, each other key is read once
--                   with EXISTS, which a 6.2 key rule (it allows every command or none)
--                   refuses, the commands were checked when the client connected
--                   (lua/acl_probe.lua), and a channel rule is not checked (6.2 allows
--                   every channel unless a user's rules say otherwise).
-- The steps the lock kinds' scripts share (docs/PROTOCOL.md §2.2-§2.5, §5.3-§5.7);
-- each script still states its whole wire contract in its own header:
-- holds(hash, field, refusal)  whether `field` holds the lock hash `hash`; when it
--                   does and `refusal` is given (a non-reentrant lock), fail(refusal).
-- replayed(latch)   the reply an unlock already gave under the latch key `latch`
--                   (a resend of it), or nil; a number (0 or 1), so
--                   `replayed(latch) or unlock()` runs the unlock only once.
-- latched(latch, ttl, reply)  record `reply` (0: still held, 1: released) under
--                   the latch key for `ttl` ms, and return it.
-- release_hold(hash, field, latch, ttl, release)  take one of `field`'s holds of
--                   the hash away: nil if it holds none; 0 if it still holds some
--                   (the hash keeps its TTL; tracked; latched); 1 if that was its last (its
--                   field stays at 0): release() runs, then 1 is latched.
-- track(hash)      read the lock hash `hash` (PTTL) as the script's last command on it:
--                   a script that writes a hash that existed before it and that still
--                   holds one of the caller's fields calls it after its last write, so a
--                   client that tracks (CLIENT TRACKING, docs/PROTOCOL.md §2.10) keeps
--                   hearing of the hash's changes: tracking forgets a key at any write to
--                   it, and its reads arm it again. Costs nothing to anyone else.
-- lengthen(key, ms) set `key`'s TTL to `ms` milliseconds unless it already lives
--                   at least that long: PEXPIRE max(PTTL, ms). No script of this
--                   crate shortens the TTL of a lock it holds but the read unlock's
--                   need (docs/PROTOCOL.md §2.9, §5.3).
-- take_rw(hash, mode, field)  take the free read-write lock `hash` in mode
--                   `mode` for `field`, with one hold (its TTL is the caller's).
-- unlock_mode(hash, cmd, channel, message, latch, ttl)  the mode of the read-write
--                   lock `hash`; when it has none, nil, with `message` published
--                   by `cmd` on `channel` and 1 latched anyway, as Redisson does.
-- delete_published(key, cmd, channel, message)  delete `key`; if it existed,
--                   publish `message` by `cmd` on `channel` and return 1, else 0.
-- force_unlock_mode(hash, mode, cmd, channel, message)  delete_published on the
--                   read-write lock `hash` if it is in mode `mode`, else 0.
-- Integers are decimal digits only, no sign (delta_arg's may have "-"), no leading zero, as Redis parses
-- PEXPIRE and SET PX values; each range stays exact in a Lua double.
-- KEYS, ARGV  none of its own: the checks read the script's ARGV; the other
--             helpers take what they use as arguments.
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

-- The check of ARGV[i] as a number in [min, max], a decimal integer (after a "-"
-- when `signed`); `what` names the range in the error.
local function ranged_arg(min, max, what, signed)
    local digits = signed and '^%-?[1-9]%d*$' or '^[1-9]%d*$'
    return function(i)
        local v = ARGV[i]
        if v ~= nil and (v == '0' or string.find(v, digits)) then
            local n = tonumber(v)
            if n >= min and n <= max then
                return n
            end
        end
        bad_arg(i, what)
    end
end

local ms_arg = ranged_arg(1, 3155760000000, 'an integer of milliseconds in [1, 3155760000000]')
local ms0_arg = ranged_arg(0, 3155760000000, 'an integer of milliseconds in [0, 3155760000000]')
local epoch_ms_arg = ranged_arg(1, 9007199254740991, 'epoch milliseconds in [1, 9007199254740991]')
local permits_arg = ranged_arg(1, 2147483647, 'a permit count in [1, 2147483647]')
local permits0_arg = ranged_arg(0, 2147483647, 'a permit count in [0, 2147483647]')
local delta_arg = ranged_arg(-2147483648, 2147483647, 'a permit change in [-2147483648, 2147483647]', true)
local positive_arg = ranged_arg(1, 9007199254740991, 'an integer in [1, 9007199254740991]')

local function count_arg(i)
    return ranged_arg(1, #ARGV - i, 'a count in [1, ' .. (#ARGV - i) .. '] of the arguments after it')(i)
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

local function permitted(pub, checks)
    local function refuse(cmd, target)
        fail('NOPERM this user may not run ' .. string.upper(cmd) .. ' on ' .. target)
    end
    local check = redis.acl_check_cmd
    if check == nil then
        -- Redis 6.2: EVAL checked the declared keys already; read the others.
        local seen = {}
        for _, key in ipairs(KEYS) do
            seen[key] = true
        end
        for i = 1, #checks, 2 do
            local cmd, target = checks[i], checks[i + 1]
            if cmd ~= 'publish' and not seen[target] then
                seen[target] = true
                local r = redis.pcall('exists', target)
                if type(r) == 'table' and string.find(r.err or '', "can't access", 1, true) then
                    refuse(cmd, target)
                end
            end
        end
        return
    end
    for i = 1, #checks, 2 do
        local cmd, target = checks[i], checks[i + 1]
        if cmd == 'publish' then
            if pub ~= 'SPUBLISH' and not check('publish', target, '0') then
                refuse('publish', target)
            end
            if pub ~= 'PUBLISH' and not check('spublish', target, '0') then
                refuse('spublish', target)
            end
        elseif not check(cmd, target) then
            refuse(cmd, target)
        end
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

local function holds(hash, field, refusal)
    if redis.call('hexists', hash, field) == 0 then
        return false
    end
    if refusal then
        fail(refusal)
    end
    return true
end

local function track(hash)
    redis.call('pttl', hash)
end

local function release_hold(hash, field, latch, ttl, release)
    if redis.call('hexists', hash, field) == 0 then
        return nil
    end
    if redis.call('hincrby', hash, field, -1) > 0 then
        track(hash)
        return latched(latch, ttl, 0)
    end
    release()
    return latched(latch, ttl, 1)
end

local function lengthen(key, ms)
    if redis.call('pttl', key) < tonumber(ms) then
        redis.call('pexpire', key, ms)
    end
end

local function take_rw(hash, mode, field)
    redis.call('hset', hash, 'mode', mode)
    redis.call('hset', hash, field, 1)
end

local function unlock_mode(hash, cmd, channel, message, latch, ttl)
    local mode = redis.call('hget', hash, 'mode')
    if mode == false then
        publish(cmd, channel, message)
        latched(latch, ttl, 1)
        return nil
    end
    return mode
end

local function delete_published(key, cmd, channel, message)
    if redis.call('del', key) == 1 then
        publish(cmd, channel, message)
        return 1
    end
    return 0
end

local function force_unlock_mode(hash, mode, cmd, channel, message)
    if redis.call('hget', hash, 'mode') ~= mode then
        return 0
    end
    return delete_published(hash, cmd, channel, message)
end
