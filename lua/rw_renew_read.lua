-- Batched watchdog renewal of read holds (docs/PROTOCOL.md §5.6, Redisson 4.5+):
-- each owner's own timeout keys and the hash, never other owners' keys.
-- Runs after args.lua.
-- KEYS[2i-1]  N_i, a lock hash
-- KEYS[2i]    its key prefix, {N_i} (N_i itself if it contains '{')
-- ARGV[1]     lease in milliseconds, 1..3155760000000
-- ARGV[2..]   per pair i in order: a count c_i (at least 1), then c_i non-empty
--             owner fields "<clientId>:<ownerId>" of this client holding N_i for
--             reading; no more arguments
-- Returns     an array with one integer per pair: 1 if one of its owners still
--             holds N_i (its timeout keys <prefix>:<owner>:rwlock_timeout:1..count
--             and N_i now live at least the lease: max(PTTL, lease), never
--             shortened), 0 if none does (renewal must stop).
--             An INVALID_ARGUMENT error, before anything is written, if an
--             argument is out of range, missing or extra, or KEYS are not in
--             pairs; a NOPERM error, before anything is written, if the user's ACL
--             forbids a call it may make (args.lua).
ms_arg(1)
if #KEYS % 2 == 1 then
    fail('INVALID_ARGUMENT KEYS[' .. #KEYS .. '] must be followed by its key prefix')
end
local arg = 2
for _ = 2, #KEYS, 2 do
    local owners = count_arg(arg)
    for j = arg + 1, arg + owners do
        text_arg(j)
    end
    arg = arg + owners + 1
end
if arg <= #ARGV then
    bad_arg(arg, 'absent (one count and its owner fields per pair of keys)')
end
local checks = {}
for i = 1, #KEYS, 2 do
    local timeout = KEYS[i + 1] .. ':x:rwlock_timeout:1'
    for _, check in ipairs({'hget', KEYS[i], 'pttl', timeout, 'pexpire', timeout,
            'pttl', KEYS[i], 'pexpire', KEYS[i]}) do
        checks[#checks + 1] = check
    end
end
permitted(nil, checks)
local renewed = {}
arg = 2
for i = 1, #KEYS, 2 do
    local owners = tonumber(ARGV[arg])
    arg = arg + 1
    local alive = false
    for _ = 1, owners do
        local owner = ARGV[arg]
        arg = arg + 1
        local held = redis.call('hget', KEYS[i], owner)
        if held ~= false then
            alive = true
            for k = tonumber(held) or 0, 1, -1 do
                lengthen(KEYS[i + 1] .. ':' .. owner .. ':rwlock_timeout:' .. k, ARGV[1])
            end
        end
    end
    if alive then
        lengthen(KEYS[i], ARGV[1])
        track(KEYS[i])
        renewed[#renewed + 1] = 1
    else
        renewed[#renewed + 1] = 0
    end
end
return renewed
