//! Dead readers, the watchdog's read renewal, and a lost read hold.

use std::time::Duration;

use super::{assert_ttl, channel_of, timeout_key, Listener};
use crate::common::{eventually, unique, Fixture};
use fred::prelude::*;
use redisson_lock::Error;

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

/// Issue 34, item 7 (Redisson's `testReadLockLeaseTimeout`, scaled down): a
/// read hold with a 1 s lease, the same owner re-entering 600 ms later with
/// 1 s, then one of the two released. The owner's timeout keys, and the
/// hash, then live exactly as long as the remaining hold needs: ~400 ms
/// when the re-entry goes (Java's unlock leaves the same), ~1 s when the
/// first hold goes; and the remaining guard's `expires_at()` says so. A
/// writer gets the lock when the remaining hold ends, not later.
#[tokio::test]
async fn a_read_hold_keeps_what_it_was_given_and_no_more() {
    let fx = Fixture::new("rw-exact").await;
    let lease = Duration::from_millis(1000);
    let later = Duration::from_millis(600);
    for first_goes in [false, true] {
        let name = unique("rw-exact");
        let rw = fx.client.read_write_lock(&name).unwrap();
        let owner = redisson_lock::Owner::new(7);
        let read = rw.read().with_owner(owner);
        let first = read.lock_with_lease(lease).await.unwrap();
        let first_end = tokio::time::Instant::now() + lease;
        tokio::time::sleep(later).await;
        let second = read.lock_with_lease(lease).await.unwrap();
        let second_end = tokio::time::Instant::now() + lease;
        let (kept, kept_end) = if first_goes {
            first.unlock().await.unwrap();
            (second, second_end)
        } else {
            second.unlock().await.unwrap();
            (first, first_end)
        };
        let need = kept_end
            .saturating_duration_since(tokio::time::Instant::now())
            .as_millis() as i64;
        let key = timeout_key(&name, kept.field(), 1);
        for (what, ttl) in [
            ("owner's timeout key", fx.pttl(&key).await),
            ("hash", fx.pttl(&name).await),
        ] {
            assert!(
                ttl > 0 && ttl <= need + 30 && ttl >= need - 100,
                "first_goes {first_goes}: {what} PTTL {ttl}, the remaining hold needs {need}"
            );
        }
        let expires = kept.expires_at().expect("a leased hold");
        assert!(
            expires <= kept_end.into_std() + Duration::from_millis(5),
            "first_goes {first_goes}: expires_at() beyond the remaining hold's lease"
        );
        // A writer (another client, Java's role in Redisson's test) gets the
        // lock once the remaining hold's lease ends.
        let other = fx.client().await;
        let writer = other.read_write_lock(&name).unwrap().write();
        let started = tokio::time::Instant::now();
        let w = writer
            .try_lock_for(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("the writer gets the lock");
        let waited = started.elapsed();
        assert!(
            waited <= kept_end.saturating_duration_since(started) + Duration::from_millis(300),
            "first_goes {first_goes}: the writer waited {waited:?}"
        );
        assert!(kept.is_lost());
        w.unlock().await.unwrap();
    }
}

/// A read hold whose lease ran out while the owner's watchdog hold kept
/// the lock: when the watchdog hold goes, the read unlock cuts the owner's
/// time to what the remaining hold needs (nothing: its lease is past), so
/// that guard is lost; a re-entry by the same owner right after does not
/// revive it (a lost status is never untold, docs/PROTOCOL.md §2.9). The
/// re-entry starts a status of its own.
#[tokio::test]
async fn a_hold_past_its_lease_stays_lost_after_a_re_entry() {
    let fx = Fixture::new("rw-past").await;
    let rw = fx.client.read_write_lock(&fx.name).unwrap();
    let read = rw.read().with_owner(redisson_lock::Owner::new(7));
    let renewed = read.lock().await.unwrap();
    let leased = read
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        !leased.is_lost(),
        "the renewed hold keeps the lock: not lost yet"
    );
    renewed.unlock().await.unwrap();
    assert_eq!(
        leased.lost_reason(),
        Some(redisson_lock::LostReason::LeaseEnded)
    );
    // Whether the re-entry finds the field (it lives ~1 ms more) or takes
    // it afresh, the guard past its lease stays lost.
    let again = read.lock().await.unwrap();
    assert_eq!(
        leased.lost_reason(),
        Some(redisson_lock::LostReason::LeaseEnded)
    );
    assert!(!again.is_lost());
    again.unlock().await.unwrap();
    drop(leased);
}
