//! `PermitExpirableSemaphore` (Redisson's RPermitExpirableSemaphore,
//! docs/PROTOCOL.md §7.2): permit ids as Java writes and shows them, the timeout
//! zset's scores and sentinel, the reclaim of expired permits (which wakes a
//! waiter), the exact state after every operation, the limit under two
//! clients and 10 000 random steps, Java-shaped scripts written here by
//! hand, lost replies, bad input, the blocking form.
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fault::{client_through, Proxy};
use common::{eventually, numsub, sum_of, wait_numsub, wait_numsub_blocking, Fixture, InUse};
use fred::prelude::*;
use rand::Rng;
use redisson_lock::{Error, PermitId, PermitLease, MAX_DURATION};

const NEVER: &str = "922337203685477";

/// Redisson (>= 3.23.4) tryAcquire of n permits (§7.2), as Java runs it.
const JAVA_ACQUIRE: &str = "
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
const JAVA_RELEASE: &str = "
local e = redis.call('zscore', KEYS[3], ARGV[1])
local r = redis.call('zrem', KEYS[3], ARGV[1])
if r ~= 1 then return 0 end
local v = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], v)
if tonumber(e) <= tonumber(ARGV[3]) then return 0 end
return 1";

fn channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

fn timeouts(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn get(fx: &Fixture, key: &str) -> Option<String> {
    fx.raw.get(key).await.unwrap()
}

/// `ZADD key score member`.
async fn zadd(fx: &Fixture, key: &str, score: f64, member: &str) {
    let _: i64 = fx
        .raw
        .zadd(key, None, None, false, false, vec![(score, member)])
        .await
        .unwrap();
}

/// The zset's members (raw bytes) and scores (as Redis prints them).
async fn zset(fx: &Fixture, key: &str) -> Vec<(Vec<u8>, String)> {
    let reply: Value = fx
        .raw
        .custom(
            fred::cmd!("ZRANGE"),
            vec![
                key.to_string(),
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ],
        )
        .await
        .unwrap();
    let Value::Array(items) = reply else {
        panic!("{reply:?}")
    };
    items
        .chunks(2)
        .map(|pair| {
            let member = match &pair[0] {
                Value::Bytes(b) => b.to_vec(),
                Value::String(s) => s.as_bytes().to_vec(),
                other => panic!("{other:?}"),
            };
            (member, pair[1].as_string().unwrap())
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn every_operation_leaves_the_spec_state() {
    let fx = Fixture::new("pes-state").await;
    let name = &fx.name;
    let z = timeouts(name);
    let sem = fx.client.permit_expirable_semaphore(name).unwrap();
    assert_eq!(sem.timeouts_key(), z);
    assert_eq!(sem.channel(), channel(name));
    let mut listener = fx.listen(&channel(name)).await;

    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(!sem.try_set_permits(4).await.unwrap());
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));

    // A leased permit: its 16 bytes in the zset, scored now + lease.
    let before = now_ms();
    let leased = sem.acquire(Some(Duration::from_secs(10))).await.unwrap();
    let after = now_ms();
    assert_eq!(get(&fx, name).await.as_deref(), Some("2"));
    let members = zset(&fx, &z).await;
    assert_eq!(members.len(), 1);
    assert_eq!(
        members[0].0,
        leased.id().as_bytes().to_vec(),
        "16 raw bytes"
    );
    assert_eq!(
        leased.id().to_string(),
        hex(&members[0].0),
        "shown as Java shows it"
    );
    let score: i64 = members[0].1.parse().unwrap();
    assert!(
        (before + 10_000..=after + 10_000).contains(&score),
        "{score}"
    );
    assert_eq!(leased.lease(), Some(Duration::from_secs(10)));
    assert!(leased.expires_at().is_some());
    assert_eq!(fx.pttl(&z).await, -1, "no TTL: N has none");

    // A permit without a lease: the never-expires sentinel.
    let forever = sem.acquire(None).await.unwrap();
    assert_eq!(forever.lease(), None);
    assert_eq!(get(&fx, name).await.as_deref(), Some("1"));
    let members = zset(&fx, &z).await;
    assert_eq!(members.len(), 2);
    assert_eq!(members[1].0, forever.id().as_bytes().to_vec());
    assert_eq!(members[1].1, NEVER);

    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert_eq!(sem.acquired_permits().await.unwrap(), 2);
    assert_eq!(sem.permits().await.unwrap(), 3);

    match sem.get_lease_time(&leased.id()).await.unwrap() {
        Some(PermitLease::Expires(left)) => assert!(left <= Duration::from_secs(10)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sem.get_lease_time(&forever.id()).await.unwrap(),
        Some(PermitLease::Never)
    );
    let unknown = PermitId::random();
    assert_eq!(sem.get_lease_time(&unknown).await.unwrap(), None);

    let before = now_ms();
    assert!(sem
        .update_lease_time(&leased.id(), Duration::from_secs(20))
        .await
        .unwrap());
    let score: i64 = zset(&fx, &z).await[0].1.parse().unwrap();
    assert!((before + 20_000..=now_ms() + 20_000).contains(&score));
    assert!(!sem
        .update_lease_time(&unknown, Duration::from_secs(1))
        .await
        .unwrap());

    // Unknown ids: false, nothing written, nothing published.
    assert!(!sem.try_release(&unknown).await.unwrap());
    assert_eq!(
        sem.try_release_all(&[leased.id(), unknown]).await.unwrap(),
        0
    );
    assert_eq!(get(&fx, name).await.as_deref(), Some("1"));
    assert_eq!(zset(&fx, &z).await.len(), 2);

    // Release: ZREM, INCRBY, the new count published.
    assert!(leased.release().await.unwrap());
    assert_eq!(get(&fx, name).await.as_deref(), Some("2"));
    assert_eq!(zset(&fx, &z).await.len(), 1);
    let id = forever.id();
    forever.forget();
    assert_eq!(zset(&fx, &z).await.len(), 1, "forget sends nothing");
    assert!(sem.try_release(&id).await.unwrap(), "released by id");
    assert!(!sem.try_release(&id).await.unwrap(), "once");
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));
    assert!(!fx.exists(&z).await);

    // Several at once: the number released is published (not the total).
    let (a, b) = (
        sem.acquire(None).await.unwrap(),
        sem.acquire(None).await.unwrap(),
    );
    let ids = [a.id(), b.id()];
    a.forget();
    b.forget();
    assert_eq!(sem.try_release_all(&ids).await.unwrap(), 2);
    assert_eq!(sem.try_release_all(&[]).await.unwrap(), 0);
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));

    // setPermits sets the total (available + taken) and publishes it;
    // addPermits publishes the change, only if positive.
    let held = sem.acquire(None).await.unwrap();
    sem.set_permits(5).await.unwrap();
    assert_eq!(
        get(&fx, name).await.as_deref(),
        Some("4"),
        "5 in all, 1 taken"
    );
    sem.set_permits(5).await.unwrap(); // unchanged: nothing published
    sem.add_permits(2).await.unwrap();
    assert_eq!(get(&fx, name).await.as_deref(), Some("6"));
    sem.add_permits(-1).await.unwrap();
    assert_eq!(get(&fx, name).await.as_deref(), Some("5"));
    drop(held);
    eventually("the dropped permit given back", || async {
        get(&fx, name).await.as_deref() == Some("6")
    })
    .await;

    // The zset takes the TTL of N when a permit is acquired.
    let _: bool = fx.raw.pexpire(name, 60_000, None).await.unwrap();
    let last = sem.acquire(None).await.unwrap();
    let pttl = fx.pttl(&z).await;
    assert!((59_000..=60_000).contains(&pttl), "{pttl}");
    assert!(last.release().await.unwrap());

    assert_eq!(
        listener.drain().await,
        ["3", "2", "3", "2", "5", "2", "6", "6"],
        "trySetPermits 3, release -> 2, release by id -> 3, release of 2 ids -> 2, \
         setPermits 5, addPermits 2 -> 2, the dropped permit -> 6, release -> 6"
    );
    // setPermits with no semaphore at all.
    let fresh = fx
        .client
        .permit_expirable_semaphore(&format!("{name}-fresh"))
        .unwrap();
    fresh.set_permits(2).await.unwrap();
    assert_eq!(fresh.available_permits().await.unwrap(), 2);
}

/// A permit whose lease ran out comes back by itself and wakes a waiter on
/// another client, which sleeps only until that expiry (no message is sent
/// for an expiry): long before its own timeout.
#[tokio::test]
async fn an_expired_permit_comes_back_and_wakes_a_waiter() {
    let fx = Fixture::new("pes-expiry").await;
    let other = fx.client().await;
    let sem = fx.client.permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let crashed = sem.acquire(Some(Duration::from_millis(500))).await.unwrap();
    let taken_at = Instant::now();
    let crashed_id = crashed.id();
    crashed.forget(); // a worker that died holding it
    let waiter = tokio::spawn({
        let sem = other.permit_expirable_semaphore(&fx.name).unwrap();
        async move {
            let permit = sem
                .try_acquire_for(Duration::from_secs(20), None)
                .await
                .unwrap()
                .expect("the expired permit came back");
            (Instant::now(), permit)
        }
    });
    let (at, permit) = waiter.await.unwrap();
    let waited = at - taken_at;
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_secs(3),
        "woke {waited:?} after the 500 ms permit was taken"
    );
    let members = zset(&fx, &timeouts(&fx.name)).await;
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].0, permit.id().as_bytes().to_vec());
    assert!(!sem.try_release(&crashed_id).await.unwrap(), "reclaimed");
    assert!(permit.release().await.unwrap());
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
}

/// 8 tasks on two clients, 10 000 steps: acquire (with a long lease or
/// none; waiting, trying once, or cancelled at a random point), use, give
/// back by `release()`, by id, or by dropping. Never above the limit; the
/// counts exact afterwards, the zset empty, no subscription left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_above_the_limit_and_exact_after_10000_random_steps() {
    const LIMIT: i64 = 3;
    const TASKS: usize = 8;
    const STEPS: usize = 10_000;
    let fx = Fixture::new("pes-random").await;
    let clients = [fx.client.clone(), fx.client().await];
    let sem = clients[0].permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(LIMIT as u32).await.unwrap());
    let in_use = Arc::new(InUse::new(LIMIT));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let sem = clients[t % 2].permit_expirable_semaphore(&fx.name).unwrap();
        let in_use = in_use.clone();
        tasks.push(tokio::spawn(async move {
            let mut acquired = 0u64;
            for _ in 0..STEPS / TASKS {
                let (lease, how, cancel_after, release) = {
                    let mut rng = rand::rng();
                    (
                        rng.random_bool(0.5).then_some(Duration::from_secs(60)),
                        rng.random_range(0..4u32),
                        Duration::from_micros(rng.random_range(0..1_500)),
                        rng.random_range(0..3u32),
                    )
                };
                let permit = match how {
                    0 => sem.try_acquire(lease).await.unwrap(),
                    1 => match tokio::time::timeout(cancel_after, sem.acquire(lease)).await {
                        Ok(permit) => Some(permit.unwrap()),
                        Err(_) => None,
                    },
                    _ => Some(sem.acquire(lease).await.unwrap()),
                };
                let Some(permit) = permit else { continue };
                acquired += 1;
                in_use.enter(1);
                tokio::task::yield_now().await;
                in_use.leave(1);
                match release {
                    0 => assert!(permit.release().await.unwrap()),
                    1 => {
                        let id = permit.id();
                        permit.forget();
                        assert!(sem.try_release(&id).await.unwrap());
                    }
                    _ => drop(permit),
                }
            }
            acquired
        }));
    }
    let acquired = sum_of(tasks).await;
    assert!(acquired > STEPS as u64 / 2, "{acquired} acquisitions");
    eventually("every permit back", || async {
        sem.available_permits().await.unwrap() == LIMIT
    })
    .await;
    assert_eq!(sem.acquired_permits().await.unwrap(), 0);
    assert!(!fx.exists(&timeouts(&fx.name)).await);
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sem.available_permits().await.unwrap(), LIMIT);
    eprintln!("{acquired} acquisitions in {:?}", started.elapsed());
}

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

#[tokio::test]
async fn dropped_waiters_and_cancelled_acquisitions_leak_nothing() {
    let fx = Fixture::new("pes-drop").await;
    let sem = fx.client.permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let held = sem.acquire(None).await.unwrap();
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire(None).await.map(drop) }
    });
    wait_numsub(&fx.raw, &channel(&fx.name), 1).await;
    waiter.abort();
    let _ = waiter.await;
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    assert!(held.release().await.unwrap());
    for micros in (0..400).step_by(20) {
        let _ = tokio::time::timeout(Duration::from_micros(micros), sem.acquire(None)).await;
    }
    eventually("every cancelled acquisition given back", || async {
        sem.available_permits().await.unwrap() == 1
    })
    .await;
    assert_eq!(sem.acquired_permits().await.unwrap(), 0);
    assert_eq!(numsub(&fx.raw, &channel(&fx.name)).await, 0);
}

/// An acquisition whose reply is lost is released by its id right behind it.
#[tokio::test]
async fn a_lost_acquire_reply_is_undone_by_its_id() {
    let fx = Fixture::new("pes-lost").await;
    let proxy = Proxy::start(fx.server.port).await;
    let client = client_through(&proxy, |c| {
        c.timeout(Duration::from_millis(300))
            .retry_delay(Duration::from_millis(50))
    })
    .await;
    let sem = client.permit_expirable_semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    assert!(sem.acquire(None).await.unwrap().release().await.unwrap()); // scripts loaded
    let mut listener = fx.listen(&channel(&fx.name)).await;
    proxy.stall_to_client();
    let outcome = sem.try_acquire(None).await;
    assert!(
        matches!(&outcome, Err(e) if e.is_transient()),
        "{outcome:?}"
    );
    // It ran (took the permit), then its undo gave it back: "1" published.
    let heard = listener.next().await;
    assert_eq!(heard.value.as_string().as_deref(), Some("1"));
    assert_eq!(get(&fx, &fx.name).await.as_deref(), Some("1"));
    assert!(!fx.exists(&timeouts(&fx.name)).await);
    proxy.resume();
    let permit = sem.acquire(None).await.unwrap();
    assert!(permit.release().await.unwrap());
}

#[tokio::test]
async fn bad_input_gets_typed_errors_and_writes_nothing() {
    let fx = Fixture::new("pes-bad").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let sem = common::named(|n| client.permit_expirable_semaphore(n), name);
    for lease in [
        Duration::ZERO,
        Duration::from_micros(999),
        MAX_DURATION + Duration::from_millis(1),
        Duration::MAX,
    ] {
        assert!(matches!(
            sem.acquire(Some(lease)).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            sem.try_acquire_for(Duration::from_secs(1), Some(lease))
                .await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            sem.update_lease_time(&PermitId::random(), lease).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(matches!(
        sem.set_permits(i32::MAX as u32 + 1).await,
        Err(Error::InvalidArgument(_))
    ));
    for text in [
        String::new(),
        "xyz".into(),
        "0".repeat(31),
        "g".repeat(32),
        "0".repeat(33),
    ] {
        assert!(matches!(
            text.parse::<PermitId>(),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(!fx.exists(name).await);

    // Keys of the wrong type: N a hash, or the zset a string.
    let _: () = raw.hset(name, ("f", "1")).await.unwrap();
    let wrong = |r: redisson_lock::Result<()>| matches!(r, Err(Error::WrongType { .. }));
    assert!(wrong(sem.acquire(None).await.map(drop)));
    assert!(wrong(sem.available_permits().await.map(drop)));
    assert!(wrong(sem.try_release(&PermitId::random()).await.map(drop)));
    assert!(wrong(sem.set_permits(1).await));
    assert!(wrong(sem.add_permits(1).await));
    let _: i64 = raw.del(name).await.unwrap();
    let _: () = raw
        .set(timeouts(name), "x", None, None, false)
        .await
        .unwrap();
    let _: () = raw.set(name, "1", None, None, false).await.unwrap();
    assert!(wrong(sem.acquire(None).await.map(drop)));
    assert!(wrong(sem.acquired_permits().await.map(drop)));
    assert!(wrong(
        sem.get_lease_time(&PermitId::random()).await.map(drop)
    ));
    assert_eq!(get(&fx, name).await.as_deref(), Some("1"), "untouched");
}

#[cfg(feature = "blocking")]
#[test]
fn blocking_permit_expirable_semaphore_and_late_drops() {
    let (server, _client, name, sem) =
        common::blocking_handle("pes-blocking", |c, n| c.permit_expirable_semaphore(n));
    assert!(sem.try_set_permits(1).unwrap());
    let permit = sem.acquire(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(permit.lease(), Some(Duration::from_secs(30)));
    let id = permit.id();
    assert!(matches!(
        sem.get_lease_time(&id).unwrap(),
        Some(PermitLease::Expires(_))
    ));
    let waiter = std::thread::spawn({
        let sem = sem.clone();
        move || {
            sem.try_acquire_for(Duration::from_secs(20), None)
                .unwrap()
                .map(|p| p.release())
        }
    });
    // Release once the waiter waits (it subscribed), so the publish wakes it.
    wait_numsub_blocking(&server, &channel(&name), 1);
    drop(permit); // synchronous release
    assert!(matches!(waiter.join().unwrap(), Some(Ok(true))));
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert_eq!(sem.acquired_permits().unwrap(), 0);

    // A guard dropped after its runtime is gone does not panic.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (async_client, guard) = runtime.block_on(async {
        let c = server.client().await;
        let g = c
            .permit_expirable_semaphore(&name)
            .unwrap()
            .acquire(Some(Duration::from_secs(1)))
            .await
            .unwrap();
        (c, g)
    });
    drop(runtime);
    drop(guard);
    drop(async_client);
    // Its permit comes back when its lease runs out.
    let deadline = Instant::now() + Duration::from_secs(5);
    while sem.available_permits().unwrap() != 1 {
        assert!(Instant::now() < deadline, "the late permit came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}
