-- Spin lock forceUnlock (docs/PROTOCOL.md §6.1): delete without publishing.
-- Runs after args.lua, like every script that writes; it has no ARGV to check.
-- KEYS[1]  N, the lock hash
-- Returns  1 if N existed, else 0. A NOPERM error, before anything is written, if the
--          user's ACL forbids a call it may make (args.lua).
permitted(nil, {'del', KEYS[1]})
return redis.call('del', KEYS[1])
