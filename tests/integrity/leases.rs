//! Defects 3 and 5: every watchdog hold of an owner is renewed whatever
//! leases its re-entries carry, and `extend` never leaves a guard believing
//! in more time than Redis gives it, even when its reply is lost.

use std::time::Duration;

use redisson_lock::Owner;

use crate::common::{command_calls, eventually, Fixture};
use crate::every_kind;

/// For every kind: a hold taken with the watchdog, re-entered by its owner
/// with a 100 ms lease, lives on through three watchdog periods (the
/// watchdog keeps renewing the owner's field), and neither guard is lost.
#[tokio::test]
async fn a_watchdog_hold_outlives_a_leased_reentry() {
    let fx = Fixture::with_watchdog("watchdog-leased-reentry", Duration::from_secs(1)).await;
    let owner = Owner::new(7);
    let mut held = Vec::new();
    for (kind, lock) in every_kind(&fx.client, &fx.name) {
        let lock = lock.with_owner(owner);
        let first = lock.lock().await.unwrap();
        let leased = lock
            .try_lock_for_with_lease(Duration::ZERO, Duration::from_millis(100))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{kind}: re-entered"));
        held.push((kind, lock, first, leased));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (kind, lock, first, leased) in held {
        assert_eq!(lock.hold_count(owner).await.unwrap(), 2, "{kind}: lapsed");
        assert!(!first.is_lost() && !leased.is_lost(), "{kind}");
        leased.unlock().await.unwrap();
        first.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap(), "{kind}");
    }
}

/// `extend` to a lease shorter than what the key has left does not
/// shorten it: the guard then expires no earlier than Redis lets the key go.
#[tokio::test]
async fn extend_never_shortens_a_hold() {
    let fx = Fixture::with_watchdog("extend-shorter", Duration::from_secs(2)).await;
    for (kind, lock) in every_kind(&fx.client, &fx.name) {
        let mut guard = lock.lock().await.unwrap();
        guard.extend(Duration::from_millis(100)).await.unwrap();
        let pttl = fx.pttl(lock.name()).await;
        assert!(pttl > 1_500, "{kind}: extend cut the TTL to {pttl} ms");
        let expires = guard.expires_at().expect("an explicit lease now");
        assert!(
            expires > std::time::Instant::now() + Duration::from_millis(1_400),
            "{kind}: expires_at() follows the TTL left, not the shorter lease"
        );
        guard.unlock().await.unwrap();
    }
}

/// An `extend` whose reply is lost (held back by a proxy, its future
/// dropped): whatever Redis did with it, the guard is never "held" while
/// the key is gone (sampled every 10 ms for more than its short lease and a
/// renewal period).
#[tokio::test]
async fn an_extend_whose_reply_is_lost_never_makes_lost_late() {
    let server = crate::common::Server::start();
    let raw = server.raw().await;
    let proxy = crate::common::fault::Proxy::start(server.port).await;
    let watchdog = Duration::from_secs(2);
    let client =
        crate::common::fault::client_through(&proxy, |c| c.lock_watchdog_timeout(watchdog)).await;
    let name = crate::common::unique("extend-reply-lost");
    let owner = Owner::new(8);
    let lock = client.lock(&name).unwrap().with_owner(owner);
    // The renewal script is cached on the server first, so that the extend
    // below runs at once (no NOSCRIPT round trip held back by the proxy).
    let mut warm = client
        .lock(&format!("{name}-warm"))
        .unwrap()
        .lock()
        .await
        .unwrap();
    warm.extend(watchdog).await.unwrap();
    warm.unlock().await.unwrap();
    let guard = std::sync::Arc::new(tokio::sync::Mutex::new(lock.lock().await.unwrap()));
    let evals = command_calls(&raw, "evalsha").await;
    proxy.stall_to_client();
    let extending = {
        let guard = guard.clone();
        tokio::spawn(async move {
            let mut guard = guard.lock().await;
            guard.extend(Duration::from_millis(100)).await
        })
    };
    eventually("Redis ran the extend", || async {
        command_calls(&raw, "evalsha").await > evals
    })
    .await;
    extending.abort();
    let _ = extending.await;
    proxy.resume();
    let guard = guard.lock().await;
    let until = tokio::time::Instant::now() + Duration::from_millis(1_200);
    while tokio::time::Instant::now() < until {
        let held = lock.is_held_by(owner).await.unwrap();
        assert!(
            held || guard.is_lost(),
            "the key is gone and the guard does not know it"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Defect 4, the other way round: a hold forgotten, then released without
/// its guard, leaves the owner's other holds with their time.
#[tokio::test]
async fn an_owner_unlock_after_forget_keeps_the_others_time() {
    let fx = Fixture::new("forget-unlock").await;
    let owner = Owner::new(9);
    let lock = fx.client.lock(&fx.name).unwrap().with_owner(owner);
    let kept = lock.lock_with_lease(Duration::from_secs(2)).await.unwrap();
    lock.lock_with_lease(Duration::from_millis(500))
        .await
        .unwrap()
        .forget();
    lock.unlock().await.unwrap();
    let pttl = fx.pttl(&fx.name).await;
    assert!(
        pttl > 1_500,
        "the unlock cut the remaining hold to {pttl} ms"
    );
    assert!(!kept.is_lost());
    assert_eq!(lock.hold_count(owner).await.unwrap(), 1);
    kept.unlock().await.unwrap();
    assert!(!fx.exists(&fx.name).await);
}

/// An unlock whose first try ran but whose reply was lost, while the
/// client stays cut off until that try's latch has expired: its resend,
/// still queued in the client, must not be written then (it would take a
/// second hold away, here the owner's other, long-leased one).
#[tokio::test]
async fn an_unlock_resent_after_its_latch_expired_takes_nothing_more() {
    use crate::common::fault::{client_through, Proxy};
    let server = crate::common::Server::start();
    let raw = server.raw().await;
    let proxy = Proxy::start(server.port).await;
    // Latch TTL max((0.2 + 0.1) × 2, 1 + 0.2) = 1.2 s for a watchdog hold.
    let client = client_through(&proxy, |c| {
        c.timeout(Duration::from_millis(200))
            .retry_delay(Duration::from_millis(100))
            .retry_attempts(1)
            .lock_watchdog_timeout(Duration::from_secs(1))
    })
    .await;
    let name = crate::common::unique("unlock-late-resend");
    let owner = Owner::new(11);
    let lock = client.lock(&name).unwrap().with_owner(owner);
    // The unlock script is cached on the server first.
    let warm = client.lock(&format!("{name}-warm")).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    let long = lock.lock_with_lease(Duration::from_secs(60)).await.unwrap();
    let short = lock.lock().await.unwrap();
    let field = lock.owner_field(owner);
    proxy.stall_to_client();
    let unlocking = tokio::spawn(short.unlock());
    eventually("the first try ran", || async {
        fred::interfaces::HashesInterface::hget::<Option<i64>, _, _>(&raw, &name, &field)
            .await
            .unwrap()
            == Some(1)
    })
    .await;
    // Cut off: the reply is lost, and the resend waits in the client.
    proxy.refuse(true);
    proxy.cut();
    proxy.wait_connections(0, Duration::from_secs(5)).await;
    proxy.resume();
    let latches = format!("redisson_unlock_latch:{{{name}}}:*");
    eventually("the first try's latch expired", || async {
        let keys: Vec<String> =
            fred::interfaces::ClientLike::custom(&raw, fred::cmd!("KEYS"), vec![latches.clone()])
                .await
                .unwrap();
        keys.is_empty()
    })
    .await;
    proxy.refuse(false);
    let _ = unlocking.await.unwrap();
    // Anything still queued before it is written before this reply (once
    // the client has reconnected).
    let start = std::time::Instant::now();
    let count = loop {
        match lock.hold_count(owner).await {
            Ok(count) => break count,
            Err(e) if e.is_transient() && start.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(count, 1, "a resend took the long hold away");
    assert!(!long.is_lost());
    long.unlock().await.unwrap();
}
