//! The same guarantees, checked for every exclusive lock kind through the one
//! generic `Lock<K>` API: mutual exclusion across two clients, lease expiry,
//! watchdog renewal, waking by publish, and random cancellation.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, unique, Server};
use fred::prelude::*;
use rand::Rng;
use redisson_lock::{Client, Kind, Lock, Ttl};

type Make<K> = fn(&Client, &str) -> Lock<K>;

fn rlock(c: &Client, n: &str) -> Lock<redisson_lock::Reentrant> {
    c.lock(n).unwrap()
}
fn fair(c: &Client, n: &str) -> Lock<redisson_lock::Fair> {
    c.fair_lock(n).unwrap()
}
fn spin(c: &Client, n: &str) -> Lock<redisson_lock::Spin> {
    c.spin_lock(n).unwrap()
}
fn fenced(c: &Client, n: &str) -> Lock<redisson_lock::Fenced> {
    c.fenced_lock(n).unwrap()
}
fn write(c: &Client, n: &str) -> Lock<redisson_lock::Write> {
    c.read_write_lock(n).unwrap().write()
}

/// Holders inside the critical section; leaving on drop, before the guard.
struct Inside(Arc<AtomicUsize>);

impl Inside {
    fn enter(count: &Arc<AtomicUsize>) -> Inside {
        assert_eq!(
            count.fetch_add(1, Ordering::SeqCst),
            0,
            "two holders at once"
        );
        Inside(count.clone())
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Six owners on two clients; every fourth round is cancelled at a random
/// point, and half the guards are dropped rather than unlocked. No two
/// holders ever overlap, no increment is lost among completed rounds, and
/// afterwards nothing is held, queued or subscribed, and no key is left.
async fn exclusion_and_cancellation<K: Kind>(make: Make<K>) {
    let server = Server::start();
    let clients = [server.client().await, server.client().await];
    let raw = server.raw().await;
    let name = unique("kind");
    let counter = format!("{name}:counter");
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..6 {
        let lock = make(&clients[t % 2], &name);
        let (raw, counter, inside) = (server.raw().await, counter.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut completed = 0i64;
            for round in 0..16 {
                let work = async {
                    let guard = lock.lock().await.unwrap();
                    let entered = Inside::enter(&inside);
                    let v: Option<i64> = raw.get(&counter).await.unwrap();
                    let _: () = raw
                        .set(&counter, v.unwrap_or(0) + 1, None, None, false)
                        .await
                        .unwrap();
                    drop(entered);
                    if rand::rng().random_bool(0.5) {
                        guard.unlock().await.unwrap(); // may be cancelled mid-unlock
                    } // else: the dropped guard releases in the background
                };
                if round % 4 == 3 {
                    let after = Duration::from_micros(rand::rng().random_range(0..2_000));
                    let _ = tokio::time::timeout(after, work).await;
                } else {
                    work.await;
                    completed += 1;
                }
            }
            completed
        }));
    }
    let mut completed = 0;
    for task in tasks {
        completed += task.await.unwrap();
    }
    let probe = make(&clients[0], &name);
    eventually("nothing held", || {
        let probe = probe.clone();
        async move { !probe.is_locked().await.unwrap() }
    })
    .await;
    eventually("nobody subscribed", || {
        let raw = raw.clone();
        async move {
            let channels: Vec<String> = raw
                .custom(fred::cmd!("PUBSUB"), vec!["CHANNELS", "*"])
                .await
                .unwrap();
            channels.is_empty()
        }
    })
    .await;
    // Nothing else left behind either: no hash, queue, deadlines, unlock
    // latches or reader keys; only the counter (and a fenced lock's token,
    // which by design outlives every hold).
    eventually("no lock keys left", || {
        let (raw, counter) = (raw.clone(), counter.clone());
        async move {
            let keys: Vec<String> = raw.custom(fred::cmd!("KEYS"), vec!["*"]).await.unwrap();
            keys.iter()
                .all(|k| *k == counter || k.starts_with("redisson_lock_token:"))
        }
    })
    .await;
    let total: i64 = raw.get(&counter).await.unwrap();
    assert!(
        total >= completed,
        "{total} < {completed}: an increment was lost"
    );
}

/// A lease ends the hold (and fires `lost`); the watchdog keeps a hold past
/// three of its timeouts.
async fn expiry_and_renewal<K: Kind>(make: Make<K>) {
    let server = Server::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout(Duration::from_millis(600)))
        .await;
    let lock = make(&client, &unique("kind-ttl"));
    let leased = lock
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), leased.lost())
        .await
        .expect("lease ran out");
    eventually("expired", || {
        let lock = lock.clone();
        async move { !lock.is_locked().await.unwrap() }
    })
    .await;
    drop(leased); // its background unlock finds nothing

    let renewed = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2_000)).await; // > 3 watchdog timeouts
    assert!(
        renewed.is_held().await.unwrap(),
        "renewed past three timeouts"
    );
    assert!(!renewed.is_lost());
    match lock.remain_time_to_live().await.unwrap() {
        Ttl::Expires(left) => assert!(left <= Duration::from_millis(600)),
        other => panic!("{other:?}"),
    }
    renewed.unlock().await.unwrap();
}

/// A waiter on another client is woken by the holder's unlock message long
/// before the holder's 30 s lease would have run out.
async fn woken_by_publish<K: Kind>(make: Make<K>) {
    let server = Server::start();
    let (a, b) = (server.client().await, server.client().await);
    let name = unique("kind-wake");
    let holder = make(&a, &name).lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = make(&b, &name);
        async move {
            lock.try_lock_for(Duration::from_secs(20), None)
                .await
                .unwrap()
                .map(|g| (Instant::now(), g))
        }
    });
    let raw = server.raw().await;
    eventually("the waiter subscribed", || {
        let raw = raw.clone();
        async move {
            let channels: Vec<String> = raw
                .custom(fred::cmd!("PUBSUB"), vec!["CHANNELS", "*"])
                .await
                .unwrap();
            !channels.is_empty()
        }
    })
    .await;
    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (at, guard) = waiter.await.unwrap().expect("acquired");
    assert!(
        at - released < Duration::from_secs(2),
        "woken after {:?}",
        at - released
    );
    guard.unlock().await.unwrap();
}

macro_rules! kind_tests {
    ($module:ident, $make:expr, publishes: $publishes:tt) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn excludes_across_clients_and_survives_cancellation() {
                exclusion_and_cancellation($make).await;
            }

            #[tokio::test]
            async fn expires_and_renews() {
                expiry_and_renewal($make).await;
            }

            kind_tests!(@wake $publishes, $make);
        }
    };
    (@wake true, $make:expr) => {
        #[tokio::test]
        async fn wakes_by_publish() {
            woken_by_publish($make).await;
        }
    };
    (@wake false, $make:expr) => {};
}

kind_tests!(reentrant, rlock, publishes: true);
kind_tests!(fair_lock, fair, publishes: true);
kind_tests!(fenced_lock, fenced, publishes: true);
kind_tests!(write_lock, write, publishes: true);
kind_tests!(spin_lock, spin, publishes: false);
