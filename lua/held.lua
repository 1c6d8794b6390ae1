-- Whether holds still exist (docs/PROTOCOL.md §2.9, the hold check). Read-only: no
-- argument checks, no writes.
-- KEYS[1..k]  lock hashes N1..Nk
-- ARGV[1..k]  owner field of Ni at ARGV[i] ("<clientId>:<ownerId>", or with ":write")
-- Returns     an array of k integers: 1 if Ni holds the field (HEXISTS), else 0.
local held = {}
for i = 1, #KEYS do
    held[i] = redis.call('hexists', KEYS[i], ARGV[i])
end
return held
