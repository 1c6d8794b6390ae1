-- The ACL check a client runs when it connects (docs/PROTOCOL.md §9.5): every command
-- the locks' and synchronizers' scripts run, tried once on a probe key no lock uses,
-- in a form the command refuses after the ACL check and before it writes (a number
-- that is not one, a key that does not exist). The few with no such form (RPUSH,
-- INCR, DECR) write the probe key and delete it again, only once DEL is known to be
-- allowed. Only a refused *command* counts: a key or channel rule that excludes the
-- probe's names says nothing of the locks' (the scripts check those themselves,
-- args.lua's permitted), so the probe key is not declared.
-- KEYS     none
-- ARGV[1]  the probe key, redisson_lock_acl_probe:{<client id>}
-- ARGV[2]  the publish command the client uses: "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  an array of the command names the user may not run, in upper case; empty
--          when it may run them all.
local k = ARGV[1]
local denied = {}
local function refused(r)
    if type(r) ~= 'table' or r.err == nil then
        return false
    end
    -- Redis 6.2 and 7: "... can't run this command or subcommand"; Valkey: "... has no
    -- permissions to run the 'x' command".
    return string.find(r.err, 'run this command', 1, true) ~= nil
        or string.find(r.err, 'permissions to run the', 1, true) ~= nil
end
local function try(cmd, ...)
    local r = redis.pcall(cmd, ...)
    if refused(r) then
        denied[#denied + 1] = string.upper(cmd)
        return false
    end
    return true
end
for _, read in ipairs({ 'get', 'exists', 'pttl', 'hgetall', 'hlen', 'lrange', 'lindex' }) do
    if read == 'lrange' then
        try(read, k, 0, 0)
    elseif read == 'lindex' then
        try(read, k, 0)
    else
        try(read, k)
    end
end
try('hexists', k, 'f')
try('hget', k, 'f')
try('zscore', k, 'm')
try('zrange', k, 0, 0)
try('zrangebyscore', k, 0, 0)
try('zcount', k, 0, 0)
try('time')
try('set', k, 'v', 'px', 'x')
try('pexpire', k, 'x')
try('hincrby', k, 'f', 'x')
try('hset', k, 'f', 'v', 'g')
try('hdel', k, 'f')
try('incrby', k, 'x')
try('decrby', k, 'x')
try('zadd', k, 'x', 'm')
try('zincrby', k, 'x', 'm')
try('zrem', k, 'm')
try('lpop', k)
try('lrem', k, 0, 'v')
if try('del', k) then
    for _, write in ipairs({ 'rpush', 'incr', 'decr' }) do
        if write == 'rpush' then
            try(write, k, 'v')
        else
            try(write, k)
        end
        redis.pcall('del', k)
    end
end
local pub = ARGV[2]
if pub ~= 'SPUBLISH' then
    try('publish', k, 'acl probe')
end
if pub ~= 'PUBLISH' then
    try('spublish', k, 'acl probe')
end
return denied
