-- RLock forceUnlock, whoever holds it (docs/PROTOCOL.md §2.5). Runs after args.lua.
-- KEYS[1]  N, the lock hash
-- KEYS[2]  unlock channel, redisson_lock__channel:{N}
-- ARGV[1]  unlock message, "0" (non-empty)
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  1 if N existed and was deleted (message published), else 0. An
--          INVALID_ARGUMENT error, before anything is written, if an argument is
--          out of range; a NOPERM error, before anything is written, if the user's
--          ACL forbids a call it may make (args.lua).
text_arg(1)
publish_arg(2)
permitted(ARGV[2], {'del', KEYS[1], 'publish', KEYS[2]})
return delete_published(KEYS[1], ARGV[2], KEYS[2], ARGV[1])
