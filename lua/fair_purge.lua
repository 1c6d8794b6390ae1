-- Fragment placed before the fair-lock scripts that purge (see src/script.rs):
-- purge_stale_head(Q, Z, now) removes waiters from the head of the queue Q
-- while their deadline in Z has passed (docs/PROTOCOL.md §4.2). Only the head is
-- purged; an entry without a score stops the purge.
-- KEYS, ARGV  none of its own: the script it precedes passes them in.
-- Returns     nothing.
local function purge_stale_head(queue, timeouts, now)
    while true do
        local head = redis.call('lindex', queue, 0)
        if head == false then return end
        local deadline = tonumber(redis.call('zscore', timeouts, head))
        if deadline == nil or deadline > now then return end
        redis.call('zrem', timeouts, head)
        redis.call('lpop', queue)
    end
end
