-- Fragment placed before the fair-lock scripts that purge (see src/connection/script.rs):
-- purge_stale_head(Q, Z, now) removes waiters from the head of the queue Q
-- while their deadline in Z has passed (docs/PROTOCOL.md §4.2). Only the head is
-- purged; an entry without a score stops the purge.
-- wake_head(Q, cmd, base, message) publishes `message` by `cmd` (a checked
-- publish_arg) on the channel base:head of the waiter at the head of Q, if any
-- (§4.6, §4.7: an unlock wakes only the head).
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

local function wake_head(queue, cmd, base, message)
    local head = redis.call('lindex', queue, 0)
    if head ~= false then
        publish(cmd, base .. ':' .. head, message)
    end
end
