//! Races the model found (RELIABILITY.md, *Model-based tests*, bugs 4–6):
//! a forced unlock through the holder's own client, and the unlock without
//! a guard. The forced-unlock races need its reply to be applied after
//! something else of the client saw the key gone: [`force_unlock_late`]
//! makes that certain.

use std::time::Duration;

use redisson_lock::{Error, LostReason, Owner};

use fred::interfaces::ClientLike;

use crate::common::{eventually, spawn_waiter, wait_numsub, within, Server};
use crate::every_kind;
use crate::hearing::{keyspace, NOTIFYING};

/// `lock.force_unlock()`, its reply applied about 100 ms after Redis sent
/// it: the call runs on a runtime of its own whose only thread is kept
/// busy once the command was handed to the client, while the client's own
/// tasks (watchers, waiters) go on.
async fn force_unlock_late<K: redisson_lock::Kind>(lock: &redisson_lock::Lock<K>) -> bool {
    let lock = lock.clone();
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let busy = async {
                tokio::task::yield_now().await;
                std::thread::sleep(Duration::from_millis(100));
            };
            let (unlocked, ()) = tokio::join!(lock.force_unlock(), busy);
            unlocked.unwrap()
        })
    })
    .await
    .unwrap()
}

/// Bug 4: a forced unlock through the holder's own client tells the guard
/// `ForceUnlocked`, even when the keyspace watcher (and the release
/// channel's, `lost()` being awaited) found the hold gone first.
#[tokio::test]
async fn a_forced_unlock_through_the_holders_client_is_reported_as_such() {
    let server = Server::private_with(&NOTIFYING);
    let client = server.client_with(|c| c.keyspace_notifications(true)).await;
    let raw = server.raw().await;
    let name = crate::common::unique("forced-own");
    for (kind, lock) in every_kind(&client, &name) {
        let key = lock.name().to_owned();
        for round in 0..3 {
            let guard = lock.lock().await.unwrap();
            let lost = tokio::spawn(guard.lost());
            wait_numsub(&raw, &keyspace(&key), 1).await;
            assert!(force_unlock_late(&lock).await, "{kind}");
            let reason = within(Duration::from_secs(5), "lost() fires", lost).await;
            assert_eq!(reason, LostReason::ForceUnlocked, "{kind}, round {round}");
            assert_eq!(guard.lost_reason(), Some(LostReason::ForceUnlocked));
            drop(guard);
            wait_numsub(&raw, &keyspace(&key), 0).await;
        }
    }
}

/// Bug 6: a waiter of the client that force-unlocks, woken by that forced
/// unlock's message, takes the lock and keeps it: it is not marked lost
/// with the holds the forced unlock removed, and is renewed.
#[tokio::test]
async fn a_waiter_woken_by_its_own_clients_forced_unlock_keeps_the_lock() {
    let server = Server::private();
    let client = server.client().await;
    let raw = server.raw().await;
    let name = crate::common::unique("forced-waiter");
    for (kind, lock) in every_kind(&client, &name) {
        if matches!(kind, "read" | "spin") {
            // Readers share: nobody waits behind one; a spin waiter is
            // woken by its backoff, not by the forced unlock's message.
            continue;
        }
        let pattern = format!("*{}*", lock.name());
        for round in 0..3 {
            let holder = lock.lock().await.unwrap();
            let waiter = spawn_waiter(&lock, Duration::from_secs(10));
            eventually("the waiter subscribed", || async {
                !raw.custom::<Vec<String>, _>(fred::cmd!("PUBSUB"), vec!["CHANNELS", &pattern])
                    .await
                    .unwrap()
                    .is_empty()
            })
            .await;
            assert!(force_unlock_late(&lock).await, "{kind}");
            assert_eq!(holder.lost_reason(), Some(LostReason::ForceUnlocked));
            let guard = within(Duration::from_secs(5), "the waiter", waiter)
                .await
                .unwrap_or_else(|| panic!("{kind}: the waiter got nothing"));
            assert_eq!(guard.lost_reason(), None, "{kind}, round {round}");
            assert_eq!(guard.expires_at(), None, "{kind}: no longer renewed");
            guard.unlock().await.unwrap();
        }
    }
}

/// Bug 5: the unlock without a guard takes the newest guard's hold, also
/// after an older guard was released: here the leased one, so the owner's
/// remaining watchdog guard is still renewed.
#[tokio::test]
async fn the_unlock_without_a_guard_takes_the_newest_guards_hold() {
    let server = Server::private();
    let client = server.client().await;
    let name = crate::common::unique("newest-guard");
    let owner = Owner::new(5);
    let lock = client.lock(&name).unwrap().with_owner(owner);
    let first = lock.lock().await.unwrap();
    let second = lock.lock().await.unwrap();
    let leased = lock.lock_with_lease(Duration::from_secs(60)).await.unwrap();
    first.unlock().await.unwrap();
    lock.unlock().await.unwrap();
    assert_eq!(second.expires_at(), None, "the watchdog guard is renewed");
    assert!(!second.is_lost());
    assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    // The leased guard's hold was the one taken: it holds nothing, and its
    // re-entry, extend and unlock send nothing.
    let mut leased = leased;
    assert!(matches!(leased.reenter().await, Err(Error::NotHeld { .. })));
    let extended = leased.extend(Duration::from_secs(90)).await;
    assert!(matches!(extended, Err(Error::NotHeld { .. })));
    assert!(matches!(leased.unlock().await, Err(Error::NotHeld { .. })));
    assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    second.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}
