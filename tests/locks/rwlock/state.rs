//! The exact Redis state of read and write holds, the downgrade, and forced
//! unlocks of one mode.

use std::time::Duration;

use super::{assert_ttl, channel_of, field, latches_gone, map, timeout_key, Listener};
use crate::common::Fixture;
use fred::prelude::*;
use redisson_lock::{Error, Kind, Lock, LockGuard, Owner};

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
    let writer = rw.write().with_owner(me);
    let w1 = writer
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

    // Partial unlock: count 1, TTL kept (docs/PROTOCOL.md §2.9: no unlock
    // that leaves holds changes the TTL), nothing published.
    w2.unlock().await.unwrap();
    assert_eq!(
        fx.hgetall(name).await,
        map(&[("mode", "write"), (&fw, "1")])
    );
    assert_ttl(
        fx.pttl(name).await,
        9_000..=10_000,
        "a partial unlock keeps the TTL",
    );

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
pub async fn forced_out<K: Kind>(
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
