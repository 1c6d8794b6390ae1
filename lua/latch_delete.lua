-- RCountDownLatch delete() (docs/PROTOCOL.md §7.3). Runs after args.lua.
-- KEYS[1]  N, the latch (string: the count)
-- KEYS[2]  latch channel, redisson_countdownlatch__channel__{N}
-- ARGV[1]  new-count message, "1" (what Redisson publishes on delete)
-- ARGV[2]  publish command, "PUBLISH", "SPUBLISH" or "BOTH"
-- Returns  1 if N existed (deleted, "1" published), else 0. An INVALID_ARGUMENT
--          error, before anything is written, if an argument is out of range; a
--          NOPERM error, before anything is written, if the user's ACL forbids a
--          call it may make (args.lua).
flag_arg(1)
publish_arg(2)
permitted(ARGV[2], {'del', KEYS[1], 'publish', KEYS[2]})
return delete_published(KEYS[1], ARGV[2], KEYS[2], ARGV[1])
