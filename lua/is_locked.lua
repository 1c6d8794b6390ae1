-- Whether a lock with the RLock hash layout is held (Redisson's isLocked: EXISTS).
-- KEYS[1]  N, the lock hash
-- Returns  1 if N exists, else 0.
return redis.call('exists', KEYS[1])
