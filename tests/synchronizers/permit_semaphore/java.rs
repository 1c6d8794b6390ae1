//! Java-shaped scripts written here by hand, against ours.

use std::time::{Duration, Instant};

use super::{channel, hex, now_ms, timeouts, zadd, zset, NEVER};
use crate::common::{wait_numsub, Fixture};
use fred::prelude::*;
use redisson_lock::PermitId;

/// Redisson (>= 3.23.4) tryAcquire of n permits (§7.2), as Java runs it.
pub const JAVA_ACQUIRE: &str = "
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local v = redis.call('incrby', KEYS[1], #expired)
  if v > 0 then redis.call(ARGV[5], KEYS[3], v) end
end
local v = redis.call('get', KEYS[1])
if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return redis.status_reply('OK')
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and first[2] ~= ARGV[4] then return ':' .. first[2] end
return nil";

/// Redisson tryRelease(id) (§7.2).
pub const JAVA_RELEASE: &str = "
local e = redis.call('zscore', KEYS[3], ARGV[1])
local r = redis.call('zrem', KEYS[3], ARGV[1])
if r ~= 1 then return 0 end
local v = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], v)
if tonumber(e) <= tonumber(ARGV[3]) then return 0 end
return 1";

/// Java's scripts, written here from the spec: a Java permit (16 bytes) is
/// seen and released by ours through the id Java shows; ours is released by
/// Java's script; a Java release wakes our waiter; a 3.16-style hex member
/// is counted and, once expired, reclaimed.
#[tokio::test]
async fn java_shaped_commands_observe_and_drive_ours() {
    let fx = Fixture::new("pes-java").await;
    let name = fx.name.clone();
    let z = timeouts(&name);
    let sem = fx.client.permit_expirable_semaphore(&name).unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());
    let java_acquire = |id: Vec<u8>, expiry: i64| {
        let raw = fx.raw.clone();
        let keys = vec![name.clone(), z.clone(), channel(&name)];
        async move {
            let args: Vec<Value> = vec![
                "1".into(),
                expiry.to_string().into(),
                now_ms().to_string().into(),
                NEVER.into(),
                "PUBLISH".into(),
                Value::Bytes(id.into()),
            ];
            raw.eval::<Value, _, _, _>(JAVA_ACQUIRE, keys, args)
                .await
                .unwrap()
        }
    };
    let java_release = |id: Vec<u8>| {
        let raw = fx.raw.clone();
        let keys = vec![name.clone(), channel(&name), z.clone()];
        async move {
            let args: Vec<Value> = vec![
                Value::Bytes(id.into()),
                "1".into(),
                now_ms().to_string().into(),
                "PUBLISH".into(),
            ];
            raw.eval::<Value, _, _, _>(JAVA_RELEASE, keys, args)
                .await
                .unwrap()
        }
    };

    // Java takes one (16 random bytes, as Java >= 3.17 does).
    let java_id: [u8; 16] = rand::random();
    let reply = java_acquire(java_id.to_vec(), now_ms() + 30_000).await;
    assert_eq!(reply.as_string().as_deref(), Some("OK"));
    assert_eq!(sem.acquired_permits().await.unwrap(), 1);
    // Ours takes the other; Java's next try reports our expiry as ":score".
    let ours = sem.acquire(Some(Duration::from_secs(5))).await.unwrap();
    let reply = java_acquire(rand::random::<[u8; 16]>().to_vec(), now_ms() + 1_000).await;
    let earliest = reply.as_string().unwrap();
    assert!(earliest.starts_with(':'), "{earliest}");

    // A Java release of our permit (by its bytes) wakes our waiter.
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move {
            sem.try_acquire_for(Duration::from_secs(20), None)
                .await
                .unwrap()
                .map(|p| (Instant::now(), p))
        }
    });
    wait_numsub(&fx.raw, &channel(&name), 1).await;
    let released = Instant::now();
    assert_eq!(
        java_release(ours.id().as_bytes().to_vec()).await.as_i64(),
        Some(1)
    );
    let (at, got) = waiter.await.unwrap().expect("woken");
    assert!(
        at - released < Duration::from_secs(2),
        "{:?}",
        at - released
    );
    assert!(!ours.release().await.unwrap(), "Java released it already");

    // Ours releases Java's permit through the id Java shows.
    let shown: PermitId = hex(&java_id).parse().unwrap();
    assert_eq!(shown.as_bytes(), &java_id);
    assert!(sem.try_release(&shown).await.unwrap());
    assert!(got.release().await.unwrap());
    assert_eq!(sem.available_permits().await.unwrap(), 2);

    // 3.16 wrote ids as 32-character hex text: counted, reclaimed when expired.
    let old_id = hex(&rand::random::<[u8; 16]>());
    let _: i64 = fx.raw.decr_by(&name, 2).await.unwrap();
    zadd(&fx, &z, now_ms() as f64 + 300.0, &old_id).await;
    zadd(&fx, &z, now_ms() as f64 + 60_000.0, &"f".repeat(32)).await;
    assert_eq!(sem.acquired_permits().await.unwrap(), 2);
    let next = sem
        .try_acquire_for(Duration::from_secs(10), None)
        .await
        .unwrap()
        .expect("the old permit expired and came back");
    let members: Vec<Vec<u8>> = zset(&fx, &z).await.into_iter().map(|m| m.0).collect();
    assert!(!members.contains(&old_id.clone().into_bytes()), "reclaimed");
    assert!(
        members.contains(&"f".repeat(32).into_bytes()),
        "still taken"
    );
    assert!(next.release().await.unwrap());
}
