-- Batched watchdog renewal (docs/PROTOCOL.md §2.6, Redisson 3.44+). Runs after args.lua.
-- KEYS[1..k]  lock hashes N1..Nk
-- ARGV[1]     lease in milliseconds, 1..3155760000000
-- ARGV[2..k+1] owner field of Ni at ARGV[i + 1], non-empty; no more arguments
-- Returns     an array of k integers: 1 if Ni was still held by its owner and now
--             lives at least the lease (max(PTTL, lease): never shortened), 0 if it
--             was gone (renewal must stop).
--             An INVALID_ARGUMENT error, before anything is written, if an
--             argument is out of range, missing or extra; a NOPERM error, before
--             anything is written, if the user's ACL forbids a call it may make
--             (args.lua).
ms_arg(1)
for i = 2, #KEYS + 1 do
    text_arg(i)
end
if #ARGV > #KEYS + 1 then
    bad_arg(#KEYS + 2, 'absent (one owner field per key)')
end
local checks = {}
for i = 1, #KEYS do
    for _, cmd in ipairs({'hexists', 'pttl', 'pexpire'}) do
        checks[#checks + 1] = cmd
        checks[#checks + 1] = KEYS[i]
    end
end
permitted(nil, checks)
local renewed = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        lengthen(KEYS[i], ARGV[1])
        track(KEYS[i])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
