-- ReadWriteLock read forceUnlock (docs/PROTOCOL.md §5.7): only a lock held for reading.
-- Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  channel, redisson_rwlock:{N}
-- ARGV[1]  unlock message, "0" (non-empty)
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  1 if N was in mode "read" and was deleted (message published), else 0.
--          An INVALID_ARGUMENT error, before anything is written, if an
--          argument is out of range; a NOPERM error, before anything is written,
--          if the user's ACL forbids a call it may make (args.lua).
text_arg(1)
publish_arg(2)
permitted(ARGV[2], {'del', KEYS[1], 'publish', KEYS[2]})
return force_unlock_mode(KEYS[1], 'read', ARGV[2], KEYS[2], ARGV[1])
