-- Batched watchdog renewal (PROTOCOL.md §2.6, Redisson 3.44+).
-- KEYS[1..k]  lock hashes N1..Nk
-- ARGV[1]     lease in milliseconds
-- ARGV[2..k+1] owner field of Ni at ARGV[i + 1]
-- Returns     an array of k integers: 1 if Ni was still held by its owner and its
--             TTL was reset to the lease, 0 if it was gone (renewal must stop).
local renewed = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
