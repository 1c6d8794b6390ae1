//! The `metrics` feature: a lock/unlock, a busy try, a wait that times out,
//! a cancelled wait, a waiter's subscription, renewals, a lost lock (found
//! gone by the watchdog, and force-unlocked) and a semaphore permit move the
//! metrics the README documents, with their units, read through
//! `metrics-util`'s debugging recorder.
//!
//! Each test runs on tokio's current-thread runtime, so the client's tasks
//! (watchdog, pub/sub hub) run on the test's thread and report to the
//! recorder set for that thread alone: tests do not see each other's metrics.
#![cfg(feature = "metrics")]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{wait_numsub, Fixture};
use fred::prelude::*;
use metrics::Unit;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;

/// A metric and its labels, sorted: `("redisson_lock_held", [("kind", "lock")])`.
type Id = (String, Vec<(String, String)>);

/// What the recorder saw so far. The debugging recorder resets counters and
/// gauges to zero at each snapshot, so totals are kept here.
struct Seen {
    snapshotter: Snapshotter,
    counters: HashMap<Id, u64>,
    gauges: HashMap<Id, f64>,
    histograms: HashMap<Id, Vec<f64>>,
    units: HashMap<String, Option<Unit>>,
}

impl Seen {
    fn new(snapshotter: Snapshotter) -> Seen {
        Seen {
            snapshotter,
            counters: HashMap::new(),
            gauges: HashMap::new(),
            histograms: HashMap::new(),
            units: HashMap::new(),
        }
    }

    fn update(&mut self) -> &mut Seen {
        for (key, unit, _description, value) in self.snapshotter.snapshot().into_vec() {
            let (kind, key) = key.into_parts();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let name = key.name().to_owned();
            self.units.insert(name.clone(), unit);
            let id = (name, labels);
            match (kind, value) {
                (MetricKind::Counter, DebugValue::Counter(n)) => {
                    *self.counters.entry(id).or_default() += n;
                }
                (MetricKind::Gauge, DebugValue::Gauge(g)) => {
                    *self.gauges.entry(id).or_default() += g.into_inner();
                }
                (MetricKind::Histogram, DebugValue::Histogram(values)) => self
                    .histograms
                    .entry(id)
                    .or_default()
                    .extend(values.into_iter().map(|v| v.into_inner())),
                other => panic!("unexpected metric value {other:?}"),
            }
        }
        self
    }

    fn counter(&mut self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.update();
        self.counters.get(&id(name, labels)).copied().unwrap_or(0)
    }

    fn gauge(&mut self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.update();
        self.gauges.get(&id(name, labels)).copied().unwrap_or(0.0)
    }

    fn histogram(&mut self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.update();
        self.histograms
            .get(&id(name, labels))
            .cloned()
            .unwrap_or_default()
    }
}

fn id(name: &str, labels: &[(&str, &str)]) -> Id {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.sort();
    (name.to_owned(), labels)
}

/// A debugging recorder set as this thread's default (leaked, one per test),
/// and what it saw.
fn recording() -> (Seen, metrics::LocalRecorderGuard<'static>) {
    let recorder: &'static DebuggingRecorder = Box::leak(Box::new(DebuggingRecorder::new()));
    let seen = Seen::new(recorder.snapshotter());
    (seen, metrics::set_default_local_recorder(recorder))
}

const ACQUISITIONS: &str = "redisson_lock_acquisitions_total";
const WAIT: &str = "redisson_lock_wait_seconds";
const HELD: &str = "redisson_lock_held";
const RENEWALS: &str = "redisson_lock_renewals_total";
const RENEWAL_FAILURES: &str = "redisson_lock_renewal_failures_total";
const LOST: &str = "redisson_lock_lost_total";
const SUBSCRIPTIONS: &str = "redisson_lock_subscriptions";

#[tokio::test]
async fn lock_unlock_contention_and_renewal_move_the_metrics() {
    let (mut seen, _local) = recording();
    let fx = Fixture::with_watchdog("metrics", Duration::from_millis(600)).await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let lock_kind = [("kind", "lock"), ("outcome", "acquired")];

    // The counters an alert watches exist from the connect on, at zero.
    seen.update();
    for (name, labels) in [
        (RENEWALS, &[][..]),
        (RENEWAL_FAILURES, &[][..]),
        (LOST, &[("kind", "lock"), ("reason", "gone")][..]),
        (LOST, &[("kind", "fair_lock"), ("reason", "expired")][..]),
        (
            LOST,
            &[("kind", "write_lock"), ("reason", "force_unlocked")][..],
        ),
        (
            LOST,
            &[("kind", "read_lock"), ("reason", "lease_ended")][..],
        ),
    ] {
        assert_eq!(
            seen.counters.get(&id(name, labels)),
            Some(&0),
            "{name} {labels:?} registered at zero on connect"
        );
    }

    let guard = lock.lock().await.unwrap();
    assert_eq!(seen.counter(ACQUISITIONS, &lock_kind), 1);
    assert_eq!(seen.histogram(WAIT, &lock_kind).len(), 1);
    assert_eq!(seen.gauge(HELD, &[("kind", "lock")]), 1.0);

    // Another client: busy when trying once, timeout after a wait, and a
    // waiter dropped part-way is counted as cancelled.
    let other = fx.client().await;
    let contender = other.lock(&fx.name).unwrap();
    assert!(contender.try_lock().await.unwrap().is_none());
    assert_eq!(
        seen.counter(ACQUISITIONS, &[("kind", "lock"), ("outcome", "busy")]),
        1
    );
    let waited = contender
        .try_lock_for(Duration::from_millis(100))
        .await
        .unwrap();
    assert!(waited.is_none());
    let timeout = [("kind", "lock"), ("outcome", "timeout")];
    assert_eq!(seen.counter(ACQUISITIONS, &timeout), 1);
    let took = seen.histogram(WAIT, &timeout);
    assert!(
        took.len() == 1 && took[0] >= 0.1 && took[0] < 5.0,
        "a 100 ms wait recorded in seconds: {took:?}"
    );
    let dropped = tokio::time::timeout(Duration::from_millis(50), contender.lock()).await;
    assert!(dropped.is_err());
    assert_eq!(
        seen.counter(ACQUISITIONS, &[("kind", "lock"), ("outcome", "cancelled")]),
        1
    );

    // A waiter holds a subscription while it waits, and leaves it after;
    // so does the holder's client while it holds (its hold's watch). (First
    // the earlier waiters' UNSUBSCRIBE must have landed, or their
    // subscription could be taken for the next one's.)
    let channel = lock.channel().to_owned();
    wait_numsub(&fx.raw, &channel, 1).await;
    assert_eq!(seen.gauge(SUBSCRIPTIONS, &[]), 1.0, "the hold's watch");
    let waiter = tokio::spawn({
        let contender = contender.clone();
        async move { contender.lock().await.unwrap().unlock().await.unwrap() }
    });
    wait_numsub(&fx.raw, &channel, 2).await;
    assert_eq!(seen.gauge(SUBSCRIPTIONS, &[]), 2.0);

    // The watchdog renews every 200 ms.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(seen.counter(RENEWALS, &[]) >= 2, "renewals counted");
    assert_eq!(seen.counter(RENEWAL_FAILURES, &[]), 0);

    guard.unlock().await.unwrap();
    waiter.await.unwrap();
    assert_eq!(seen.counter(ACQUISITIONS, &lock_kind), 2);
    common::eventually(
        "the waiter's and the watch's subscriptions are closed",
        || {
            let open = seen.gauge(SUBSCRIPTIONS, &[]);
            async move { open == 0.0 }
        },
    )
    .await;
    assert_eq!(seen.gauge(HELD, &[("kind", "lock")]), 0.0);
    assert_eq!(
        seen.counter(ACQUISITIONS, &[("kind", "lock"), ("outcome", "error")]),
        0
    );
    assert_eq!(
        seen.counter(LOST, &[("kind", "lock"), ("reason", "gone")]),
        0
    );

    // Kinds are labelled by the method that makes them.
    let fair = fx.client.fair_lock(&fx.name).unwrap().lock().await.unwrap();
    assert_eq!(seen.gauge(HELD, &[("kind", "fair_lock")]), 1.0);
    fair.unlock().await.unwrap();
    assert_eq!(seen.gauge(HELD, &[("kind", "fair_lock")]), 0.0);

    // Units, as the README says.
    assert_eq!(seen.units.get(WAIT), Some(&Some(Unit::Seconds)));
    assert_eq!(seen.units.get(ACQUISITIONS), Some(&Some(Unit::Count)));
    other.shutdown().await;
}

#[tokio::test]
async fn a_lost_lock_is_counted_by_reason() {
    let (mut seen, _local) = recording();
    let fx = Fixture::with_watchdog("metrics-lost", Duration::from_millis(600)).await;

    // The key deleted behind the holder's back: the next renewal finds it gone.
    let guard = fx.client.lock(&fx.name).unwrap().lock().await.unwrap();
    let _: i64 = fx.raw.del(&fx.name).await.unwrap();
    common::lost_within(&guard, 5, "lost() fires").await;
    assert_eq!(
        seen.counter(LOST, &[("kind", "lock"), ("reason", "gone")]),
        1
    );
    // Still held by its guard until released.
    assert_eq!(seen.gauge(HELD, &[("kind", "lock")]), 1.0);
    assert!(guard.unlock().await.is_err(), "not held any more");
    assert_eq!(seen.gauge(HELD, &[("kind", "lock")]), 0.0);

    // A forced unlock through this client.
    let write = fx.client.read_write_lock(&fx.name).unwrap().write();
    let guard = write.lock().await.unwrap();
    assert!(write.force_unlock().await.unwrap());
    assert!(guard.is_lost());
    assert_eq!(
        seen.counter(
            LOST,
            &[("kind", "write_lock"), ("reason", "force_unlocked")]
        ),
        1
    );
    drop(guard);
    common::eventually("the dropped guard's hold is released", || {
        let held = seen.gauge(HELD, &[("kind", "write_lock")]);
        async move { held == 0.0 }
    })
    .await;
    // Each lost hold is counted once, however many renewals pass.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(
        seen.counter(LOST, &[("kind", "lock"), ("reason", "gone")]),
        1
    );
}

#[tokio::test]
async fn semaphore_permits_and_latch_awaits_are_counted() {
    let (mut seen, _local) = recording();
    let fx = Fixture::new("metrics-sem").await;

    let semaphore = fx.client.semaphore(&fx.name).unwrap();
    semaphore.try_set_permits(1).await.unwrap();
    let permit = semaphore.acquire(1).await.unwrap();
    let sem = [("kind", "semaphore")];
    assert_eq!(seen.gauge(HELD, &sem), 1.0);
    assert!(semaphore.try_acquire(1).await.unwrap().is_none());
    assert_eq!(
        seen.counter(ACQUISITIONS, &[("kind", "semaphore"), ("outcome", "busy")]),
        1
    );
    permit.release().await.unwrap();
    assert_eq!(seen.gauge(HELD, &sem), 0.0);
    let forgotten = semaphore.acquire(1).await.unwrap();
    forgotten.forget();
    assert_eq!(seen.gauge(HELD, &sem), 0.0);
    assert_eq!(
        seen.counter(
            ACQUISITIONS,
            &[("kind", "semaphore"), ("outcome", "acquired")]
        ),
        2
    );

    let pes = fx
        .client
        .permit_expirable_semaphore(&format!("{}-pes", fx.name))
        .unwrap();
    pes.try_set_permits(1).await.unwrap();
    let permit = pes.acquire(Some(Duration::from_secs(10))).await.unwrap();
    let kind = [("kind", "permit_expirable_semaphore")];
    assert_eq!(seen.gauge(HELD, &kind), 1.0);
    drop(permit);
    assert_eq!(seen.gauge(HELD, &kind), 0.0);

    let latch = fx
        .client
        .count_down_latch(&format!("{}-latch", fx.name))
        .unwrap();
    latch.try_set_count(1).await.unwrap();
    assert!(latch.await_for(Duration::ZERO).await.unwrap().is_none());
    latch.count_down().await.unwrap();
    latch.await_zero().await.unwrap();
    assert_eq!(
        seen.counter(
            ACQUISITIONS,
            &[("kind", "count_down_latch"), ("outcome", "busy")]
        ),
        1
    );
    assert_eq!(
        seen.counter(
            ACQUISITIONS,
            &[("kind", "count_down_latch"), ("outcome", "acquired")]
        ),
        1
    );
}

const PENDING_RELEASES: &str = "redisson_lock_pending_releases";
const ABANDONED_RELEASES: &str = "redisson_lock_abandoned_releases_total";

/// Give-backs of permits that cannot reach Redis are pending (a gauge per
/// kind) until the shutdown abandons them, which counts them; so is a permit
/// dropped after the shutdown. The permits stay taken.
#[tokio::test]
async fn give_backs_are_pending_until_a_shutdown_abandons_them() {
    let (mut seen, _local) = recording();
    let server = common::Server::start();
    let proxy = common::fault::Proxy::start(server.port).await;
    let name = common::unique("metrics-abandon");
    let (sem, pes) = (
        [("kind", "semaphore")],
        [("kind", "permit_expirable_semaphore")],
    );
    let shutdown = |labels: [(&'static str, &'static str); 1]| [labels[0], ("reason", "shutdown")];
    let (client, kept) = common::fault::stranded_give_backs(&proxy, &name).await;
    // Registered at zero on connect.
    let latch_expired = [("kind", "semaphore"), ("reason", "latch_expired")];
    assert_eq!(seen.counter(ABANDONED_RELEASES, &latch_expired), 0);
    assert!(seen
        .update()
        .counters
        .contains_key(&id(ABANDONED_RELEASES, &latch_expired)));
    assert_eq!(seen.units.get(PENDING_RELEASES), Some(&Some(Unit::Count)));
    assert_eq!(seen.units.get(ABANDONED_RELEASES), Some(&Some(Unit::Count)));
    assert_eq!(seen.gauge(PENDING_RELEASES, &sem), 2.0);
    assert_eq!(seen.gauge(PENDING_RELEASES, &pes), 1.0);
    assert_eq!(seen.counter(ABANDONED_RELEASES, &shutdown(sem)), 0);

    client.shutdown().await;
    assert_eq!(client.pending_releases(), 0);
    assert_eq!(seen.gauge(PENDING_RELEASES, &sem), 0.0);
    assert_eq!(seen.gauge(PENDING_RELEASES, &pes), 0.0);
    assert_eq!(seen.counter(ABANDONED_RELEASES, &shutdown(sem)), 2);
    assert_eq!(seen.counter(ABANDONED_RELEASES, &shutdown(pes)), 1);
    assert_eq!(seen.counter(ABANDONED_RELEASES, &latch_expired), 0);

    // A permit dropped after the shutdown is abandoned too.
    drop(kept);
    common::eventually("the late give-back abandoned", || {
        let abandoned = seen.counter(ABANDONED_RELEASES, &shutdown(sem));
        async move { abandoned == 3 }
    })
    .await;
    assert_eq!(seen.gauge(PENDING_RELEASES, &sem), 0.0);
    assert_eq!(client.pending_releases(), 0);

    // Nothing was given back: the permits stay taken.
    let raw = server.raw().await;
    let left: Option<String> = raw.get(&name).await.unwrap();
    assert_eq!(left.as_deref(), Some("0"));
    let left: Option<String> = raw.get(format!("{name}-pes")).await.unwrap();
    assert_eq!(left.as_deref(), Some("0"));
}
