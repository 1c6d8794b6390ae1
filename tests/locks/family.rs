//! Spin lock, fenced lock, multi-lock and RedLock.
use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{eventually, numsub, unique, wait_numsub, Fixture, Server};
use fred::prelude::*;
use parking_lot::Mutex;
use redisson_lock::{BackOff, Client, Config, MultiLock, Owner, Ttl};

#[tokio::test]
async fn spin_lock_shares_rlocks_layout_and_publishes_nothing() {
    let fx = Fixture::new("spin").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let spin = fx.client.spin_lock(name).unwrap();
    let rlock = fx.client.lock(name).unwrap();

    let held = rlock.lock().await.unwrap();
    assert!(
        spin.try_lock().await.unwrap().is_none(),
        "an RLock holder excludes the spin lock"
    );
    held.unlock().await.unwrap();

    let mut listener = fx.listen(rlock.channel()).await;

    let guard = spin.lock().await.unwrap();
    assert_eq!(guard.hold_count().await.unwrap(), 1);
    let fields = fx.hgetall(name).await;
    assert_eq!(fields.get(guard.field()).map(String::as_str), Some("1"));
    assert!(
        rlock.try_lock().await.unwrap().is_none(),
        "a spin holder excludes RLocks"
    );
    guard.unlock().await.unwrap();
    let _: i64 = raw.publish(rlock.channel(), "marker").await.unwrap();
    let first = listener.next().await;
    assert_eq!(
        first.value.as_string().as_deref(),
        Some("marker"),
        "spin unlock published nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_excludes_across_clients_without_subscribing() {
    let fx = Fixture::new("spin-mutex").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let clients = [fx.client.clone(), fx.client().await];
    let counter = format!("{name}:counter");
    let channel = clients[0].lock(name).unwrap().channel().to_string();
    let mut tasks = Vec::new();
    for t in 0..6 {
        let lock = if t % 3 == 0 {
            clients[t % 2]
                .spin_lock_with(name, BackOff::Constant(Duration::from_millis(2)))
                .unwrap()
        } else {
            clients[t % 2].spin_lock(name).unwrap()
        };
        let raw = fx.raw().await;
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..15 {
                let guard = lock.lock().await.unwrap();
                let v: Option<i64> = raw.get(&counter).await.unwrap();
                let _: () = raw
                    .set(&counter, v.unwrap_or(0) + 1, None, None, false)
                    .await
                    .unwrap();
                guard.unlock().await.unwrap();
            }
        }));
    }
    let mut subscribed = 0;
    while tasks.iter().any(|t| !t.is_finished()) {
        subscribed = subscribed.max(numsub(raw, &channel).await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    let total: i64 = raw.get(&counter).await.unwrap();
    assert_eq!(total, 90);
    assert_eq!(subscribed, 0, "spin waiters never subscribe");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_strictly_increase_across_owners_and_clients() {
    let fx = Fixture::new("fenced").await;
    let name = &fx.name;
    let clients = [fx.client.clone(), fx.client().await];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tasks = (0..4).map(|t| {
        let (lock, seen) = (clients[t % 2].fenced_lock(name).unwrap(), seen.clone());
        tokio::spawn(async move {
            for _ in 0..250 {
                let guard = lock.lock().await.unwrap();
                // recorded while holding the lock, so the order is acquisition order
                seen.lock().push(guard.fencing_token());
                guard.unlock().await.unwrap();
            }
        })
    });
    for task in tasks.collect::<Vec<_>>() {
        task.await.unwrap();
    }
    let seen = seen.lock().clone();
    assert_eq!(seen.len(), 1000);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "tokens not strictly increasing"
    );

    let lock = clients[0].fenced_lock(name).unwrap();
    assert_eq!(lock.token_key(), format!("redisson_lock_token:{{{name}}}"));
    assert_eq!(lock.token().await.unwrap(), seen.last().copied());
    let ttl = fx.pttl(lock.token_key()).await;
    assert_eq!(ttl, -1, "the token counter never expires");

    // Re-entry takes a new token too (Redisson does the same).
    let outer = lock.lock().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    assert!(inner.fencing_token() > outer.fencing_token());
    assert!(clients[1]
        .fenced_lock(name)
        .unwrap()
        .try_lock()
        .await
        .unwrap()
        .is_none());
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

#[tokio::test]
async fn multi_lock_is_all_or_nothing() {
    let fx = Fixture::new("multi").await;
    let (client, other, base) = (&fx.client, fx.client().await, &fx.name);
    let names = [
        format!("{base}-a"),
        format!("{base}-b"),
        format!("{base}-c"),
    ];
    let multi = MultiLock::new(names.iter().map(|n| client.lock(n).unwrap())).unwrap();
    assert_eq!(multi.quorum(), 3);

    let blocker = other.lock(&names[1]).unwrap().lock().await.unwrap();
    assert!(multi.try_lock().await.unwrap().is_none());
    for name in [&names[0], &names[2]] {
        assert!(
            !client.lock(name).unwrap().is_locked().await.unwrap(),
            "partial hold of {name} released"
        );
    }

    // A waiting multi-lock gets all members once the blocker goes.
    let waiting = tokio::spawn({
        let multi = multi.clone();
        async move {
            multi
                .try_lock_for_with_lease(Duration::from_secs(10), Duration::from_secs(5))
                .await
                .unwrap()
        }
    });
    let channel = client.lock(&names[1]).unwrap().channel().to_string();
    // The waiter's client, and the blocker's (its hold's watch).
    wait_numsub(&fx.raw, &channel, 2).await;
    blocker.unlock().await.unwrap();
    let guard = waiting.await.unwrap().expect("all three acquired");
    assert_eq!(guard.guards().len(), 3);
    for name in &names {
        match client
            .lock(name)
            .unwrap()
            .remain_time_to_live()
            .await
            .unwrap()
        {
            Ttl::Expires(d) => assert!(d <= Duration::from_secs(15), "{d:?}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    for name in &names {
        assert!(!client.lock(name).unwrap().is_locked().await.unwrap());
    }
}

/// Redisson's `isHeldByThread(threadId)` on a multi-lock: `is_held_by`
/// answers for members taken by an explicit owner, on each member's own
/// client; RedLock needs a majority.
#[tokio::test]
async fn multi_lock_is_held_by_its_owner() {
    let fx = Fixture::new("multi-held").await;
    let (client, other, base) = (&fx.client, fx.client().await, &fx.name);
    let me = Owner::new(7);
    let names = [
        format!("{base}-a"),
        format!("{base}-b"),
        format!("{base}-c"),
    ];
    let multi = MultiLock::new([
        client.lock(&names[0]).unwrap().with_owner(me),
        other.lock(&names[1]).unwrap().with_owner(me),
    ])
    .unwrap();
    assert!(!multi.is_held_by(me).await.unwrap());
    let guard = multi.lock().await.unwrap();
    assert!(multi.is_held_by(me).await.unwrap());
    assert!(!multi.is_held_by(Owner::new(8)).await.unwrap());
    // Each member's field is its own client's: the same owner on the other
    // client does not hold the first member.
    let swapped = MultiLock::new([
        other.lock(&names[0]).unwrap().with_owner(me),
        client.lock(&names[1]).unwrap().with_owner(me),
    ])
    .unwrap();
    assert!(!swapped.is_held_by(me).await.unwrap());
    guard.unlock().await.unwrap();
    assert!(!multi.is_held_by(me).await.unwrap());

    // RedLock: two of three is held.
    let red = MultiLock::red_lock([
        client.lock(&names[0]).unwrap().with_owner(me),
        client.lock(&names[1]).unwrap().with_owner(me),
        client.lock(&names[2]).unwrap().with_owner(me),
    ])
    .unwrap();
    let blocker = other.lock(&names[2]).unwrap().lock().await.unwrap();
    let guard = red.lock().await.unwrap();
    assert!(red.is_held_by(me).await.unwrap());
    guard.unlock().await.unwrap();
    blocker.unlock().await.unwrap();
}

/// A multi-lock guard is lost when one member is: `lost()` resolves to that
/// member's reason and `lost_reason()` says it; a RedLock guard of three
/// survives one member's loss and is lost at the second.
#[tokio::test]
async fn a_multi_guard_says_why_it_was_lost() {
    let fx = Fixture::new("multi-lost").await;
    let (client, other, base) = (&fx.client, fx.client().await, &fx.name);
    let names: Vec<String> = (0..3).map(|i| format!("{base}-{i}")).collect();
    let multi = MultiLock::new([
        client.lock(&names[0]).unwrap(),
        client.lock(&names[1]).unwrap(),
    ])
    .unwrap();
    let guard = multi.lock().await.unwrap();
    assert_eq!(guard.lost_reason(), None);
    let lost = guard.lost();
    assert!(other.lock(&names[1]).unwrap().force_unlock().await.unwrap());
    let reason = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("heard by publish, long before any TTL");
    assert_eq!(guard.guards()[1].lost_reason(), Some(reason));
    assert_eq!(guard.lost_reason(), Some(reason));
    assert!(guard.is_lost());
    drop(guard);

    let red = MultiLock::red_lock(names.iter().map(|n| client.lock(n).unwrap())).unwrap();
    let guard = red.lock().await.unwrap();
    assert!(other.lock(&names[0]).unwrap().force_unlock().await.unwrap());
    common::eventually("the first member's loss heard", || async {
        guard.guards()[0].is_lost()
    })
    .await;
    assert_eq!(guard.lost_reason(), None, "a majority is still held");
    let lost = guard.lost();
    assert!(other.lock(&names[2]).unwrap().force_unlock().await.unwrap());
    let reason = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("heard by publish");
    assert!(guard.is_lost());
    assert!(guard.lost_reason().is_some());
    assert_eq!(guard.guards()[2].lost_reason(), Some(reason));
}

#[tokio::test]
async fn a_dropped_multi_lock_future_holds_nothing() {
    let fx = Fixture::new("multi-cancel").await;
    let client = &fx.client;
    let names: Vec<String> = (0..4).map(|i| format!("{}-{i}", fx.name)).collect();
    let blocker = client.lock(&names[3]).unwrap().lock().await.unwrap();
    let multi = MultiLock::new(names.iter().map(|n| client.lock(n).unwrap())).unwrap();
    for micros in [0, 100, 300, 1_000, 3_000, 20_000] {
        let _ = tokio::time::timeout(Duration::from_micros(micros), multi.lock()).await;
    }
    blocker.unlock().await.unwrap();
    for name in &names {
        let lock = client.lock(name).unwrap();
        eventually("member released", || {
            let lock = lock.clone();
            async move { !lock.is_locked().await.unwrap() }
        })
        .await;
    }
}

/// Three independent servers, one of them stopped: RedLock still acquires by
/// majority, and two contenders are never inside at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn red_lock_acquires_by_majority_with_a_server_down() {
    let mut servers = [Server::private(), Server::private(), Server::private()];
    // Short, so that the stopped server fails fast.
    let quick = |c: Config| c.timeout(Duration::from_millis(250)).retry_attempts(0);
    let name = unique("redlock");
    let mut contenders = Vec::new();
    for _ in 0..2 {
        let mut clients: Vec<Client> = Vec::new();
        for server in &servers {
            // Connecting is not what this test is about: on a loaded machine
            // 250 ms may not be enough to connect, so try a few times.
            let mut client = None;
            for _ in 0..5 {
                match Client::connect_with(quick(Config::from_url(&server.url).unwrap())).await {
                    Ok(c) => {
                        client = Some(c);
                        break;
                    }
                    Err(e) => eprintln!("connecting (will try again): {e}"),
                }
            }
            clients.push(client.expect("connects within 5 tries"));
        }
        contenders
            .push(MultiLock::red_lock(clients.iter().map(|c| c.lock(&name).unwrap())).unwrap());
    }
    assert_eq!(contenders[0].quorum(), 2);
    servers[2].kill();

    let inside = Arc::new(AtomicUsize::new(0));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    // Both contenders start each round together, so each round one waits
    // for the other's release (woken by its publish). Without it, the one
    // releasing could take the members again at once, every round, and the
    // other's bounded wait run out: these members are not fair locks.
    let rounds = Arc::new(tokio::sync::Barrier::new(contenders.len()));
    let mut tasks = Vec::new();
    for red in contenders {
        let (inside, acquisitions, rounds) = (inside.clone(), acquisitions.clone(), rounds.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..8 {
                rounds.wait().await;
                let guard = red
                    .try_lock_for_with_lease(Duration::from_secs(10), Duration::from_secs(5))
                    .await
                    .unwrap()
                    .expect("a majority is reachable");
                assert!(guard.guards().len() >= 2);
                let expires = guard.expires_at().expect("leased members");
                let left = expires.saturating_duration_since(std::time::Instant::now());
                assert!(
                    left > Duration::from_secs(4) && left <= Duration::from_secs(15),
                    "{left:?}"
                );
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two RedLock holders at once"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                acquisitions.fetch_add(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    common::all_within(120, tasks).await;
    assert_eq!(acquisitions.load(Ordering::SeqCst), 16);
}
