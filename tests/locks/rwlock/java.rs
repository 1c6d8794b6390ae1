//! Interop with a simulated Java reader and writer (Redisson's scripts).

use std::time::{Duration, Instant};

use super::{channel_of, map, Listener};
use crate::common::{wait_numsub, Fixture};
use fred::prelude::*;

/// Java's read acquire (docs/PROTOCOL.md §5.2), written for this test.
pub const JAVA_READ_LOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode')
local admit = mode == false or mode == 'read'
    or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1)
if not admit then
    return redis.call('pttl', KEYS[1])
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
local left = redis.call('pttl', KEYS[1])
if left < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return nil
"#;

/// Java's read unlock (docs/PROTOCOL.md §5.3, pre-latch), written for this test.
pub const JAVA_READ_UNLOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
    redis.call('publish', KEYS[2], '0')
    return nil
end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n <= 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[3] .. ':' .. (n + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    local best = -3
    local all = redis.call('hgetall', KEYS[1])
    for i = 1, #all, 2 do
        local c = tonumber(all[i + 1])
        if c then
            for j = 1, c do
                best = math.max(best, redis.call('pttl', KEYS[4] .. ':' .. all[i] .. ':rwlock_timeout:' .. j))
            end
        end
    end
    if best > 0 then
        redis.call('pexpire', KEYS[1], best)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1
"#;

/// Java's write acquire (docs/PROTOCOL.md §5.4), written for this test.
pub const JAVA_WRITE_LOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
"#;

#[tokio::test]
async fn interop_with_a_simulated_java_reader() {
    let fx = Fixture::new("rw-java").await;
    let (a, b, raw, name) = (&fx.client, fx.client().await, &fx.raw, &fx.name);
    let channel = channel_of(name);
    let java = "3f1c2a9e-8d7b-4c1e-9a55-0e4b2f6d7c11:57";
    let java_prefix = format!("{{{name}}}:{java}:rwlock_timeout");
    let eval = |script: &'static str, keys: Vec<String>, args: Vec<String>| {
        let raw = raw.clone();
        async move {
            raw.eval::<Value, _, _, _>(script, keys, args)
                .await
                .unwrap()
        }
    };

    // The Java thread takes the read lock.
    let reply = eval(
        JAVA_READ_LOCK,
        vec![name.clone(), java_prefix.clone()],
        vec!["30000".into(), java.into(), format!("{java}:write")],
    )
    .await;
    assert!(reply.is_null(), "{reply:?}");

    // Our reader shares with it.
    let rw_a = a.read_write_lock(name).unwrap();
    let ours = rw_a.read().lock().await.unwrap();
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "read"), (java, "1"), (ours.field(), "1")])
    );
    // Our writer is excluded, and so is a Java writer.
    let write_b = b.read_write_lock(name).unwrap().write();
    assert!(write_b.try_lock().await.unwrap().is_none());
    let busy = eval(
        JAVA_WRITE_LOCK,
        vec![name.clone()],
        vec![
            "30000".into(),
            "3f1c2a9e-8d7b-4c1e-9a55-0e4b2f6d7c11:58:write".into(),
        ],
    )
    .await;
    assert!(busy.as_i64().is_some_and(|t| t > 0), "{busy:?}");

    let writer = tokio::spawn(async move {
        let guard = write_b.try_lock_for(Duration::from_secs(20)).await.unwrap();
        (Instant::now(), guard)
    });
    // The writer's client, and our reader's (its hold's watch).
    wait_numsub(raw, &channel, 2).await;

    // Our reader leaves: the Java reader's timeout key keeps the hash.
    ours.unlock().await.unwrap();
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "read"), (java, "1")])
    );
    assert!(!writer.is_finished());

    // The Java reader leaves: it deletes the hash and publishes 0, which
    // wakes our writer at once.
    let released_at = Instant::now();
    let reply = eval(
        JAVA_READ_UNLOCK,
        vec![
            name.clone(),
            channel.clone(),
            java_prefix.clone(),
            format!("{{{name}}}"),
        ],
        vec![java.into()],
    )
    .await;
    assert_eq!(reply.as_i64(), Some(1));
    let (at, guard) = writer.await.unwrap();
    let guard = guard.expect("writer acquires");
    assert!(at.duration_since(released_at) < Duration::from_secs(2));

    // While we write, the Java reader is refused with the TTL.
    let busy = eval(
        JAVA_READ_LOCK,
        vec![name.clone(), java_prefix.clone()],
        vec!["30000".into(), java.into(), format!("{java}:write")],
    )
    .await;
    assert!(busy.as_i64().is_some_and(|t| t > 0), "{busy:?}");
    let mut listener = Listener::new(raw, &channel).await;
    guard.unlock().await.unwrap();
    assert_eq!(listener.next().await, "1", "Java readers are woken by 1");
    assert!(!fx.exists(name).await);
    wait_numsub(raw, &channel, 1).await; // only the listener
}
