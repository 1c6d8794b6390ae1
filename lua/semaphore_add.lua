-- addPermits(p) (docs/PROTOCOL.md §7.1, §7.2): SET N (current or 0) + p, which also
-- removes a TTL of N. Runs after args.lua and count.lua.
-- KEYS[1]  N, the semaphore (string: available permits)
-- KEYS[2]  semaphore channel, redisson_sc:{N}
-- ARGV[1]  change p, -2147483648..2147483647 (negative takes permits away)
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- ARGV[3]  what to publish: "0" the new count, always (RSemaphore); "1" p, only
--          if p > 0 (RPermitExpirableSemaphore)
-- Returns  the new count. An INVALID_ARGUMENT error (args.lua), or a WRONGTYPE
--          error if N is not an integer string (count.lua), before anything is
--          written; a NOPERM error, before anything is written, if the user's ACL
--          forbids a call it may make (args.lua).
local p = delta_arg(1)
publish_arg(2)
local expirable = flag_arg(3) == '1'
permitted(ARGV[2], {'set', KEYS[1], 'publish', KEYS[2]})
local count = (count_of(KEYS[1]) or 0) + p
redis.call('set', KEYS[1], int_text(count))
if not expirable then
    publish(ARGV[2], KEYS[2], int_text(count))
elseif p > 0 then
    publish(ARGV[2], KEYS[2], int_text(p))
end
return count
