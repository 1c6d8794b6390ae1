//! The read-write lock (docs/PROTOCOL.md §5): exact Redis state, sharing and
//! exclusion across clients, the write → read downgrade, dead readers,
//! read renewal, and interop with a simulated Java holder. Readers beside
//! writers under random cancellation, and dropped waiters, are checked with
//! every other kind in kinds.rs.
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, spawn_timed_waiter, unique, wait_numsub, Fixture};
use fred::prelude::*;
#[cfg(feature = "blocking")]
use redisson_lock::blocking::BlockingClient;
use redisson_lock::{Client, Error, Kind, Lock, LockGuard, Owner};
use tokio::sync::Barrier;

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `<clientId>:<owner>`, the read field (docs/PROTOCOL.md §1.3).
fn field(client: &Client, owner: Owner) -> String {
    format!("{}:{}", client.id().hyphenated(), owner)
}

/// `sfx(N, field) ":rwlock_timeout:" k` (docs/PROTOCOL.md §5.1, §1.4).
fn timeout_key(name: &str, field: &str, k: u32) -> String {
    if name.contains('{') {
        format!("{name}:{field}:rwlock_timeout:{k}")
    } else {
        format!("{{{name}}}:{field}:rwlock_timeout:{k}")
    }
}

fn channel_of(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

fn assert_ttl(ttl: i64, range: std::ops::RangeInclusive<i64>, what: &str) {
    assert!(range.contains(&ttl), "{what}: PTTL {ttl} not in {range:?}");
}

/// A raw subscriber on one channel, as a Java waiter would listen.
struct Listener {
    _client: fred::clients::Client,
    rx: tokio::sync::broadcast::Receiver<fred::types::Message>,
    channel: String,
}

impl Listener {
    async fn new(raw: &fred::clients::Client, channel: &str) -> Listener {
        let client = raw.clone_new();
        client.init().await.unwrap();
        let rx = client.message_rx();
        client.subscribe(channel.to_string()).await.unwrap();
        Listener {
            _client: client,
            rx,
            channel: channel.to_string(),
        }
    }

    /// The next payload published on the channel.
    async fn next(&mut self) -> String {
        let message = tokio::time::timeout(Duration::from_secs(5), self.rx.recv())
            .await
            .expect("a message within 5 s")
            .unwrap();
        assert_eq!(&*message.channel, self.channel);
        message.value.as_string().unwrap()
    }
}

async fn latches_gone(fx: &Fixture, name: &str) {
    let pattern = if name.contains('{') {
        format!("redisson_unlock_latch:{name}:*")
    } else {
        format!("redisson_unlock_latch:{{{name}}}:*")
    };
    fx.until_no_keys("unlock latches deleted", &pattern).await;
}

#[tokio::test]
async fn read_lock_state_timeout_keys_and_ttl_shrinking() {
    let fx = Fixture::new("rw-read").await;
    let (a, b, raw, name) = (&fx.client, fx.client().await, &fx.raw, &fx.name);
    let rw = a.read_write_lock(name).unwrap();
    assert_eq!(rw.name(), name);
    assert_eq!(rw.channel(), channel_of(name));
    assert_eq!(rw.read().channel(), channel_of(name));
    assert_eq!(rw.write().channel(), channel_of(name));
    let mut listener = Listener::new(raw, &channel_of(name)).await;

    let me = Owner::new(11);
    let fa = field(a, me);
    assert_eq!(rw.read().owner_field(me), fa);
    let r1 = rw.read().with_owner(me).lock().await.unwrap();
    assert_eq!(r1.field(), fa);
    assert_eq!(fx.hgetall(name).await, map(&[("mode", "read"), (&fa, "1")]));
    let ta1 = timeout_key(name, &fa, 1);
    let value: Option<String> = raw.get(&ta1).await.unwrap();
    assert_eq!(value.as_deref(), Some("1"));
    assert_ttl(fx.pttl(&ta1).await, 29_000..=30_000, "timeout key 1");
    assert_ttl(fx.pttl(name).await, 29_000..=30_000, "hash");

    // Re-entry: count 2, a second timeout key, hash TTL = max(PTTL, lease).
    let _: bool = raw.pexpire(name, 5_000, None).await.unwrap();
    let r2 = r1.reenter().await.unwrap();
    assert_eq!(fx.hgetall(name).await, map(&[("mode", "read"), (&fa, "2")]));
    let ta2 = timeout_key(name, &fa, 2);
    assert_ttl(fx.pttl(&ta2).await, 29_000..=30_000, "timeout key 2");
    assert_ttl(fx.pttl(name).await, 29_000..=30_000, "hash raised");
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 2);
    assert!(rw.read().is_held_by(me).await.unwrap());
    assert!(!rw.write().is_held_by(me).await.unwrap());

    // A reader of another client shares; a longer hash TTL is kept.
    let _: bool = raw.pexpire(name, 60_000, None).await.unwrap();
    let rb = b
        .read_write_lock(name)
        .unwrap()
        .read()
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let fb = rb.field().to_string();
    assert!(fb.starts_with(&b.id().hyphenated().to_string()));
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "read"), (&fa, "2"), (&fb, "1")])
    );
    let tb1 = timeout_key(name, &fb, 1);
    assert_ttl(fx.pttl(&tb1).await, 9_000..=10_000, "b's timeout key");
    assert_ttl(fx.pttl(name).await, 59_000..=60_000, "hash kept");

    // One of a's holds away: timeout key 2 deleted, the hash's TTL shrinks
    // to the longest remaining timeout key (a's key 1, ~30 s).
    r2.unlock().await.unwrap();
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "read"), (&fa, "1"), (&fb, "1")])
    );
    assert!(!fx.exists(&ta2).await);
    assert!(fx.exists(&ta1).await);
    assert_ttl(fx.pttl(name).await, 28_000..=30_000, "hash shrunk");

    // b leaves: its field and key go, nothing is published.
    rb.unlock().await.unwrap();
    assert_eq!(fx.hgetall(name).await, map(&[("mode", "read"), (&fa, "1")]));
    assert!(!fx.exists(&tb1).await);
    assert!(rw.read().is_locked().await.unwrap());
    assert!(!rw.write().is_locked().await.unwrap());

    // The last reader deletes the hash and publishes 0 (the first message).
    r1.unlock().await.unwrap();
    assert!(!fx.exists(name).await);
    assert!(!fx.exists(&ta1).await);
    assert_eq!(listener.next().await, "0");
    assert!(!rw.read().is_locked().await.unwrap());
    latches_gone(&fx, name).await;
}

#[tokio::test]
async fn write_lock_state_reentry_adds_the_lease() {
    let fx = Fixture::new("rw-write").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let rw = client.read_write_lock(name).unwrap();
    let mut listener = Listener::new(raw, &channel_of(name)).await;

    let me = Owner::new(5);
    let fw = format!("{}:write", field(client, me));
    assert_eq!(rw.write().owner_field(me), fw);
    let w1 = rw
        .write()
        .with_owner(me)
        .lock_with_lease(Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(w1.field(), fw);
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "write"), (&fw, "1")])
    );
    assert_ttl(fx.pttl(name).await, 4_000..=5_000, "write lease");
    assert!(rw.write().is_locked().await.unwrap());
    assert!(
        !rw.read().is_locked().await.unwrap(),
        "read isLocked: mode write with only the writer field"
    );

    // Re-entry ADDS the lease to the remaining TTL (Redisson's quirk).
    let w2 = w1.reenter().await.unwrap();
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "write"), (&fw, "2")])
    );
    assert_ttl(fx.pttl(name).await, 9_000..=10_000, "lease added");
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 2);
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 0);

    // Partial unlock: count 1, TTL reset to the lease, nothing published.
    w2.unlock().await.unwrap();
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "write"), (&fw, "1")])
    );
    assert_ttl(fx.pttl(name).await, 4_000..=5_000, "release lease");

    // Full unlock deletes the hash and publishes 1.
    w1.unlock().await.unwrap();
    assert!(!fx.exists(name).await);
    assert_eq!(listener.next().await, "1");

    // Without a lease: the watchdog timeout.
    let w = rw.write().lock().await.unwrap();
    assert_ttl(fx.pttl(name).await, 29_000..=30_000, "watchdog lease");
    w.unlock().await.unwrap();
    assert_eq!(listener.next().await, "1");
    latches_gone(&fx, name).await;
}

#[tokio::test]
async fn write_then_read_and_downgrade_state() {
    let fx = Fixture::new("shop").await;
    let (client, raw) = (&fx.client, &fx.raw);
    // A name with a hash tag: derived names keep it instead of adding braces.
    let tag = &fx.name;
    let name = format!("{{{tag}}}:rw");
    let rw = client.read_write_lock(&name).unwrap();
    let channel = format!("redisson_rwlock:{{{tag}}}:rw");
    assert_eq!(rw.channel(), channel);
    let mut listener = Listener::new(raw, &channel).await;

    let me = Owner::new(9);
    let fr = field(client, me);
    let fw = format!("{fr}:write");
    let tr1 = format!("{{{tag}}}:rw:{fr}:rwlock_timeout:1");
    assert_eq!(timeout_key(&name, &fr, 1), tr1);

    // The writer reads and releases the read first: the hash stays in write
    // mode, nothing published.
    let w = rw.write().with_owner(me).lock().await.unwrap();
    let r = rw.read().with_owner(me).lock().await.unwrap();
    assert_eq!(
        fx.hgetall(&name).await,
        map(&[("mode", "write"), (&fw, "1"), (&fr, "1")])
    );
    assert!(fx.exists(&tr1).await);
    assert!(
        rw.read().is_locked().await.unwrap(),
        "HLEN > 2 in write mode"
    );
    r.unlock().await.unwrap();
    assert_eq!(
        fx.hgetall(&name).await,
        map(&[("mode", "write"), (&fw, "1")])
    );
    assert!(!fx.exists(&tr1).await);
    w.unlock().await.unwrap();
    assert!(!fx.exists(&name).await);
    assert_eq!(
        listener.next().await,
        "1",
        "first message: the write release"
    );

    // Downgrade: write, read, release the write → mode read, and (beyond
    // Redisson) 1 is published so waiting readers re-check.
    let w = rw.write().with_owner(me).lock().await.unwrap();
    let r = rw.read().with_owner(me).lock().await.unwrap();
    w.unlock().await.unwrap();
    assert_eq!(
        fx.hgetall(&name).await,
        map(&[("mode", "read"), (&fr, "1")])
    );
    assert_eq!(listener.next().await, "1", "the downgrade publishes 1");
    assert!(rw.read().is_locked().await.unwrap());
    assert!(!rw.write().is_locked().await.unwrap());
    // A read holder cannot upgrade, and nobody else may write.
    assert!(rw
        .write()
        .with_owner(me)
        .try_lock()
        .await
        .unwrap()
        .is_none());
    assert!(rw.write().try_lock().await.unwrap().is_none());
    // Other readers may join.
    let other = rw.read().try_lock().await.unwrap().expect("readers share");
    other.unlock().await.unwrap();

    r.unlock().await.unwrap();
    assert!(!fx.exists(&name).await);
    assert!(!fx.exists(&tr1).await);
    assert_eq!(listener.next().await, "0");
    latches_gone(&fx, &name).await;
}

#[tokio::test]
async fn force_unlock_only_the_matching_mode() {
    let fx = Fixture::new("rw-force").await;
    let (a, b, raw, name) = (&fx.client, fx.client().await, &fx.raw, &fx.name);
    let rw_a = a.read_write_lock(name).unwrap();
    let rw_b = b.read_write_lock(name).unwrap();
    let mut listener = Listener::new(raw, &channel_of(name)).await;
    assert!(!rw_b.read().force_unlock().await.unwrap());
    assert!(!rw_b.write().force_unlock().await.unwrap());

    let w = rw_a.write().lock().await.unwrap();
    assert!(!rw_b.read().force_unlock().await.unwrap(), "mode is write");
    assert!(
        !rw_a.read().force_unlock().await.unwrap(),
        "same client, mode is write"
    );
    assert!(
        !w.is_lost(),
        "a force unlock that unlocked nothing leaves our writer alone"
    );
    // Unlock without a mode: Redisson publishes (1 here) and replies nil.
    forced_out(&fx, &mut listener, rw_b.write(), w, "1").await;

    let r = rw_a.read().lock().await.unwrap();
    assert!(!rw_b.write().force_unlock().await.unwrap(), "mode is read");
    // Likewise for a reader: 0 published, nil replied.
    forced_out(&fx, &mut listener, rw_b.read(), r, "0").await;
}

/// `other` force-unlocks `guard`'s hold: the hash goes and `message` is
/// published; `guard`'s own unlock is then `NotHeld` and publishes it again.
async fn forced_out<K: Kind>(
    fx: &Fixture,
    listener: &mut Listener,
    other: Lock<K>,
    guard: LockGuard<K>,
    message: &str,
) {
    assert!(fx.exists(&fx.name).await);
    assert!(other.force_unlock().await.unwrap());
    assert!(!fx.exists(&fx.name).await);
    assert_eq!(listener.next().await, message);
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    assert_eq!(listener.next().await, message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_share_while_a_writer_waits() {
    let fx = Fixture::new("rw-share").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let clients = [fx.client.clone(), fx.client().await];
    assert_ne!(clients[0].id(), clients[1].id());
    let channel = channel_of(name);
    let holding = Arc::new(Barrier::new(11));
    let release = Arc::new(Barrier::new(11));
    let mut readers = Vec::new();
    for i in 0..10 {
        let read = clients[i % 2].read_write_lock(name).unwrap().read();
        let (holding, release) = (holding.clone(), release.clone());
        readers.push(tokio::spawn(async move {
            let guard = read.lock().await.unwrap();
            holding.wait().await;
            release.wait().await;
            guard.unlock().await.unwrap();
        }));
    }
    // All ten hold at once (a reader excluding another would never arrive).
    tokio::time::timeout(Duration::from_secs(10), holding.wait())
        .await
        .expect("ten concurrent readers");
    let state = fx.hgetall(name).await;
    assert_eq!(state.len(), 11, "{state:?}");
    assert_eq!(state.get("mode").map(String::as_str), Some("read"));
    for client in &clients {
        let prefix = client.id().hyphenated().to_string();
        assert_eq!(state.keys().filter(|f| f.starts_with(&prefix)).count(), 5);
    }

    let write = clients[0].read_write_lock(name).unwrap().write();
    assert!(write.try_lock().await.unwrap().is_none());
    let writer = spawn_timed_waiter(&write, Duration::from_secs(20));
    wait_numsub(raw, &channel, 1).await;
    assert!(!writer.is_finished());
    release.wait().await;
    let released_at = Instant::now();
    for reader in readers {
        reader.await.unwrap();
    }
    let (at, guard) = writer.await.unwrap().expect("writer gets the lock");
    assert!(
        at.duration_since(released_at) < Duration::from_secs(2),
        "woken by the last reader's 0 after {:?}",
        at.duration_since(released_at)
    );
    let state = fx.hgetall(name).await;
    assert_eq!(
        state,
        map(&[("mode", "write"), (guard.field(), "1")]),
        "only the writer"
    );
    guard.unlock().await.unwrap();
    wait_numsub(raw, &channel, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_excludes_readers_and_its_release_wakes_them_all() {
    let fx = Fixture::new("rw-exclude").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let clients = [fx.client.clone(), fx.client().await];
    let channel = channel_of(name);
    let rw = clients[0].read_write_lock(name).unwrap();
    let writer = rw.write().lock().await.unwrap();
    for client in &clients {
        let read = client.read_write_lock(name).unwrap().read();
        assert!(read.try_lock().await.unwrap().is_none());
    }
    let holding = Arc::new(Barrier::new(7));
    let release = Arc::new(Barrier::new(7));
    let readers: Vec<_> = (0..6)
        .map(|i| {
            let read = clients[i % 2].read_write_lock(name).unwrap().read();
            let (holding, release) = (holding.clone(), release.clone());
            tokio::spawn(async move {
                let guard = read
                    .try_lock_for(Duration::from_secs(20), None)
                    .await
                    .unwrap()
                    .expect("reader gets the lock");
                let at = Instant::now();
                holding.wait().await;
                release.wait().await;
                guard.unlock().await.unwrap();
                at
            })
        })
        .collect();
    // One subscription per client, shared by its three waiting readers.
    wait_numsub(raw, &channel, 2).await;
    let released_at = Instant::now();
    writer.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), holding.wait())
        .await
        .expect("all six readers hold together");
    assert_eq!(fx.hgetall(name).await.len(), 7);
    release.wait().await;
    for reader in readers {
        let at = reader.await.unwrap();
        assert!(
            at.duration_since(released_at) < Duration::from_secs(2),
            "a '1' wakes every reader, woken after {:?}",
            at.duration_since(released_at)
        );
    }
    assert!(!fx.exists(name).await);
    wait_numsub(raw, &channel, 0).await;
}

#[tokio::test]
async fn downgrade_wakes_a_waiting_reader_long_before_the_ttl() {
    let fx = Fixture::new("rw-downgrade").await;
    let (writer_client, reader_client) = (&fx.client, fx.client().await);
    let (raw, name) = (&fx.raw, &fx.name);
    let channel = channel_of(name);
    let rw = writer_client.read_write_lock(name).unwrap();
    let me = Owner::new(1);
    let w = rw.write().with_owner(me).lock().await.unwrap(); // 30 s watchdog lease
    let r = rw.read().with_owner(me).lock().await.unwrap(); // write then read
    assert_eq!(rw.read().hold_count(me).await.unwrap(), 1);
    assert_eq!(rw.write().hold_count(me).await.unwrap(), 1);

    let read = reader_client.read_write_lock(name).unwrap().read();
    let waiter = spawn_timed_waiter(&read, Duration::from_secs(20));
    wait_numsub(raw, &channel, 1).await;
    let mut listener = Listener::new(raw, &channel).await;
    let downgraded_at = Instant::now();
    w.unlock().await.unwrap();
    let waiter = waiter.await.unwrap();
    let (at, guard) = waiter.expect("the reader shares with the downgraded writer");
    assert!(
        at.duration_since(downgraded_at) < Duration::from_secs(2),
        "woken after {:?} (the TTL was ~30 s)",
        at.duration_since(downgraded_at)
    );
    assert_eq!(listener.next().await, "1");
    assert_eq!(
        fx.hgetall(name).await,
        map(&[
            ("mode", "read"),
            (&field(writer_client, me), "1"),
            (guard.field(), "1")
        ])
    );
    guard.unlock().await.unwrap();
    r.unlock().await.unwrap();
    assert!(!fx.exists(name).await);
    assert_eq!(listener.next().await, "0");
}

#[tokio::test]
async fn dead_readers_do_not_keep_the_lock_alive() {
    let fx = Fixture::new("rw-dead").await;
    let (a, b, raw, name) = (&fx.client, fx.client().await, &fx.raw, &fx.name);
    let mut listener = Listener::new(raw, &channel_of(name)).await;
    let read_a = a.read_write_lock(name).unwrap().read();

    // A reader that dies: 300 ms lease, never unlocked in time.
    let dead = read_a
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let dead_key = timeout_key(name, dead.field(), 1);
    // A live reader without renewal (5 s), and one watchdog-renewed on b.
    let live = read_a
        .lock_with_lease(Duration::from_secs(5))
        .await
        .unwrap();
    let live_key = timeout_key(name, live.field(), 1);
    let renewed = b
        .read_write_lock(name)
        .unwrap()
        .read()
        .lock()
        .await
        .unwrap();
    assert_ttl(fx.pttl(name).await, 29_000..=30_000, "hash");

    eventually("the dead reader's timeout key expired", || async {
        !fx.exists(&dead_key).await
    })
    .await;
    let state = fx.hgetall(name).await;
    assert_eq!(state.len(), 4, "the dead field stays: {state:?}");
    assert!(state.contains_key(dead.field()));

    // b leaves: the hash now lives only as long as the live reader's key.
    renewed.unlock().await.unwrap();
    assert!(fx.exists(name).await);
    let live_ttl = fx.pttl(&live_key).await;
    let ttl = fx.pttl(name).await;
    assert!(
        ttl > 0 && ttl <= live_ttl && ttl <= 5_000,
        "hash PTTL {ttl}, live key {live_ttl}"
    );

    // The live reader leaves: only the dead field remains, whose timeout key
    // is gone, so the whole hash is deleted and 0 published.
    live.unlock().await.unwrap();
    assert!(!fx.exists(name).await);
    assert_eq!(listener.next().await, "0");

    assert!(dead.is_lost(), "its lease ran out");
    assert!(matches!(dead.unlock().await, Err(Error::NotHeld { .. })));
}

#[tokio::test]
async fn watchdog_renews_read_hashes_and_own_timeout_keys_only() {
    let fx = Fixture::with("rw-renew", |c| {
        c.lock_watchdog_timeout(Duration::from_secs(1))
    })
    .await;
    let (client, raw, plain) = (&fx.client, &fx.raw, &fx.name);
    let tagged = format!("{{{}}}:rw", unique("renew"));

    let rw = client.read_write_lock(plain).unwrap();
    let r1 = rw.read().lock().await.unwrap();
    let r2 = r1.reenter().await.unwrap();
    let other = rw.read().lock().await.unwrap();
    let tagged_rw = client.read_write_lock(&tagged).unwrap();
    let t1 = tagged_rw.read().lock().await.unwrap();
    let write_rw = client.read_write_lock(&unique("rw-renew-write")).unwrap();
    let w = write_rw.write().lock().await.unwrap();

    // A foreign (Java) reader on the same hash, not renewed by this client.
    let foreign = "7c1d2a9e-8d7b-4c1e-9a55-0e4b2f6d7c11:3";
    let foreign_key = timeout_key(plain, foreign, 1);
    let _: i64 = raw.hset(plain, (foreign, "1")).await.unwrap();
    let _: () = raw
        .set(&foreign_key, "1", Some(Expiration::PX(1_000)), None, false)
        .await
        .unwrap();

    // Renewal itself is the event under test: let 3.5 timeouts pass.
    tokio::time::sleep(Duration::from_millis(3_500)).await;

    let own_keys = [
        timeout_key(plain, r1.field(), 1),
        timeout_key(plain, r1.field(), 2),
        timeout_key(plain, other.field(), 1),
        timeout_key(&tagged, t1.field(), 1),
    ];
    let hashes = [plain.clone(), tagged.clone(), write_rw.name().to_string()];
    for key in own_keys.iter().chain(&hashes) {
        assert_ttl(fx.pttl(key).await, 1..=1_000, key);
    }
    assert!(
        !fx.exists(&foreign_key).await,
        "other owners' timeout keys are not renewed (Redisson 4.5+)"
    );
    for guard in [&r1, &r2, &other, &t1] {
        assert!(!guard.is_lost());
    }
    assert!(!w.is_lost());
    assert_eq!(r1.hold_count().await.unwrap(), 2);

    r2.unlock().await.unwrap();
    r1.unlock().await.unwrap();
    // The last live reader leaves; the foreign field's key is gone: deleted.
    other.unlock().await.unwrap();
    assert!(!fx.exists(plain).await);
    t1.unlock().await.unwrap();
    w.unlock().await.unwrap();
    assert!(!fx.exists(&tagged).await);
    assert!(!fx.exists(write_rw.name()).await);
}

#[tokio::test]
async fn renewal_reports_a_lost_read_hold() {
    let fx = Fixture::with("rw-lost", |c| {
        c.lock_watchdog_timeout(Duration::from_secs(1))
    })
    .await;
    let r = fx
        .client
        .read_write_lock(&fx.name)
        .unwrap()
        .read()
        .lock()
        .await
        .unwrap();
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), r.lost())
        .await
        .expect("renewal found the read hold gone");
    assert!(matches!(r.unlock().await, Err(Error::NotHeld { .. })));
}

/// Java's read acquire (docs/PROTOCOL.md §5.2), written for this test.
const JAVA_READ_LOCK: &str = r#"
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
const JAVA_READ_UNLOCK: &str = r#"
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
const JAVA_WRITE_LOCK: &str = r#"
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
        let guard = write_b
            .try_lock_for(Duration::from_secs(20), None)
            .await
            .unwrap();
        (Instant::now(), guard)
    });
    wait_numsub(raw, &channel, 1).await;

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

#[cfg(feature = "blocking")]
#[test]
fn blocking_halves_share_the_thread_owner() {
    let server = common::Server::start();
    let client =
        BlockingClient::connect(redisson_lock::Config::from_url(&server.url).unwrap()).unwrap();
    let name = unique("rw-blocking");
    let (read, write) = client.read_write_lock(&name).unwrap();
    assert_eq!(read.name(), name);

    let w = write.lock().unwrap();
    let r = read.lock().unwrap(); // the writer may read: same thread, same owner
    assert_eq!(write.hold_count().unwrap(), 1);
    assert_eq!(read.hold_count().unwrap(), 1);
    drop(w); // downgrade
    assert!(read.is_locked().unwrap());
    assert!(!write.is_locked().unwrap());

    let other = client.clone();
    let name2 = name.clone();
    let (read_ok, write_ok) = std::thread::spawn(move || {
        let (read, write) = other.read_write_lock(&name2).unwrap();
        let r = read.try_lock().unwrap();
        let read_ok = r.is_some();
        drop(r);
        let write_ok = write.try_lock_for(Duration::from_millis(100), None);
        (read_ok, write_ok.unwrap().is_some())
    })
    .join()
    .unwrap();
    assert!(read_ok, "another thread reads alongside");
    assert!(!write_ok, "another thread cannot write");

    r.unlock().unwrap();
    assert!(!read.is_locked().unwrap());
    assert!(!write.is_locked().unwrap());
}
