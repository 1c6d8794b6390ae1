//! Interop with a Java Redisson client, simulated by running the spec's script
//! semantics (docs/PROTOCOL.md §2.2, §2.3, §11.1) under another client id. These
//! scripts are written here, independently of `lua/`, as the Java side.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::{spawn_timed_waiter, wait_numsub, Fixture, Server};
use fred::prelude::*;

/// Redisson 3.8.x acquire: HSET on a free lock, HINCRBY on re-entry.
const JAVA_38_LOCK: &str = "
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil
end
return redis.call('pttl', KEYS[1])";

/// Redisson 3.10-3.21 unlock: no latch, literal `publish`.
const JAVA_OLD_UNLOCK: &str = "
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local c = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if c > 0 then redis.call('pexpire', KEYS[1], ARGV[2]); return 0 end
redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1";

/// Redisson 3.44+ unlock: latch and publish command as arguments.
const JAVA_NEW_UNLOCK: &str = "
local v = redis.call('get', KEYS[3]); if v ~= false then return tonumber(v) end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local c = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if c > 0 then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0 end
redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1";

struct Java {
    raw: fred::clients::Client,
    owner: String,
}

impl Java {
    async fn new(server: &Server, thread_id: i64) -> Java {
        Java {
            raw: server.raw().await,
            owner: format!("{}:{thread_id}", uuid::Uuid::new_v4()),
        }
    }

    async fn try_lock(&self, name: &str) -> Option<i64> {
        let reply: Value = self
            .raw
            .eval(
                JAVA_38_LOCK,
                vec![name.to_string()],
                vec!["30000".to_string(), self.owner.clone()],
            )
            .await
            .unwrap();
        reply.as_i64()
    }

    async fn unlock_old(&self, name: &str) -> Value {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        self.raw
            .eval(
                JAVA_OLD_UNLOCK,
                vec![name.to_string(), channel],
                vec!["0".to_string(), "30000".to_string(), self.owner.clone()],
            )
            .await
            .unwrap()
    }

    async fn unlock_new(&self, name: &str) -> Value {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let latch = format!(
            "redisson_unlock_latch:{{{name}}}:{}",
            uuid::Uuid::new_v4().simple()
        );
        let reply = self
            .raw
            .eval(
                JAVA_NEW_UNLOCK,
                vec![name.to_string(), channel, latch.clone()],
                vec![
                    "0".into(),
                    "30000".into(),
                    self.owner.clone(),
                    "PUBLISH".into(),
                    "16000".into(),
                ],
            )
            .await
            .unwrap();
        let _: i64 = self.raw.del(latch).await.unwrap();
        reply
    }
}

#[tokio::test]
async fn java_holder_excludes_and_wakes_a_rust_waiter() {
    let fx = Fixture::new("java-holds").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let java = Java::new(&fx.server, 57).await;
    assert_eq!(java.try_lock(name).await, None);
    assert_eq!(java.try_lock(name).await, None, "Java re-enters");

    let lock = client.lock(name).unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.try_lock().await.unwrap().is_none(), "Rust is excluded");

    let waiter = spawn_timed_waiter(&lock, Duration::from_secs(20));
    let channel = lock.channel().to_string();
    wait_numsub(raw, &channel, 1).await;
    assert_eq!(
        java.unlock_new(name).await.as_i64(),
        Some(0),
        "still held once"
    );
    let released = Instant::now();
    assert_eq!(
        java.unlock_old(name).await.as_i64(),
        Some(1),
        "released, old-style publish"
    );
    let (at, guard) = waiter.await.unwrap().expect("rust waiter acquires");
    assert!(
        at - released < Duration::from_secs(2),
        "woken by Java's publish after {:?}",
        at - released
    );
    let fields = fx.hgetall(name).await;
    assert_eq!(
        fields,
        HashMap::from([(lock.owner_field(guard.owner()), "1".to_string())])
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn rust_holder_excludes_and_wakes_a_java_waiter() {
    let fx = Fixture::new("rust-holds").await;
    let (client, name) = (&fx.client, &fx.name);
    let java = Java::new(&fx.server, 1).await;
    let lock = client.lock(name).unwrap();
    let guard = lock.lock().await.unwrap();

    // Java reads our hold the way Redisson does.
    let held: bool = java
        .raw
        .hexists(name, lock.owner_field(guard.owner()))
        .await
        .unwrap();
    assert!(held, "isHeldByThread sees our field");
    let busy = java
        .try_lock(name)
        .await
        .expect("Java is excluded and told the TTL");
    assert!((29_000..=30_000).contains(&busy), "{busy}");
    assert!(
        java.unlock_old(name).await.is_null(),
        "Java cannot unlock our hold"
    );

    // A Java waiter subscribes and is woken by our unlock's message `0`.
    let mut listener = fx
        .listen(&format!("redisson_lock__channel:{{{name}}}"))
        .await;
    guard.unlock().await.unwrap();
    let message = listener.next().await;
    assert_eq!(message.value.as_string().as_deref(), Some("0"));
    assert_eq!(
        java.try_lock(name).await,
        None,
        "Java acquires after the wake-up"
    );
    let fields: HashMap<String, String> = java.raw.hgetall(name).await.unwrap();
    assert_eq!(
        fields,
        HashMap::from([(java.owner.clone(), "1".to_string())])
    );
    assert!(lock.try_lock().await.unwrap().is_none());
    assert_eq!(java.unlock_new(name).await.as_i64(), Some(1));
}

#[tokio::test]
async fn java_unlock_latch_replays_like_ours() {
    // Our unlock script honours a latch written by an earlier run of the same
    // request: a replay returns the first result instead of decrementing again.
    let fx = Fixture::new("latch").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let lock = fx.client.lock(name).unwrap();
    let guard = lock.lock().await.unwrap();
    let inner = guard.reenter().await.unwrap();
    let field = lock.owner_field(guard.owner());
    let channel = lock.channel().to_string();
    let latch = format!(
        "redisson_unlock_latch:{{{name}}}:{}",
        uuid::Uuid::new_v4().simple()
    );
    let script = concat!(
        include_str!("../../lua/args.lua"),
        include_str!("../../lua/unlock.lua")
    );
    let run = || {
        let raw = raw.clone();
        let keys = vec![name.clone(), channel.clone(), latch.clone()];
        let args = vec![
            "0".to_string(),
            field.clone(),
            "PUBLISH".to_string(),
            "16000".to_string(),
        ];
        async move {
            raw.eval::<Value, _, _, _>(script, keys, args)
                .await
                .unwrap()
        }
    };
    assert_eq!(run().await.as_i64(), Some(0));
    assert_eq!(
        run().await.as_i64(),
        Some(0),
        "replayed, not decremented again"
    );
    assert_eq!(lock.hold_count(guard.owner()).await.unwrap(), 1);
    let latch_value: String = raw.get(&latch).await.unwrap();
    assert_eq!(latch_value, "0");
    // The script above took one hold away; the two guards now share one.
    inner.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert!(matches!(
        guard.unlock().await,
        Err(redisson_lock::Error::NotHeld { .. })
    ));
}
