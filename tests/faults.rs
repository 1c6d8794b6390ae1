//! Faults injected for real: a proxy that stalls or cuts one client's
//! connection, `CLIENT PAUSE`, `SCRIPT FLUSH`, a killed and restarted server.
//! Each test checks what users rely on: nobody holds twice by their own
//! account, the lost signal comes before the lease can have run out on the
//! server, waiters answer within their deadlines and recover afterwards, and
//! nothing is left behind.
mod common;

child_entry!();

#[path = "faults/processes.rs"]
mod processes;
#[path = "faults/soak.rs"]
mod soak;
#[path = "faults/storm.rs"]
mod storm;
#[path = "faults/tools.rs"]
mod tools;

use std::sync::Arc;
use std::time::Duration;

use common::fault::{client_pause, client_through, script_flush, PauseMode, Proxy};
use common::make::*;
use common::{eventually, unique, wait_numsub, Fixture, Server};
use fred::prelude::*;
use rand::Rng;
use redisson_lock::{Error, Kind};
use tokio::time::Instant;

const WATCHDOG: Duration = Duration::from_millis(1_500);

/// A holder whose connection stalls (renewals neither sent nor answered)
/// is told it lost the lock before another process can take it: `lost()`
/// resolves no later than the last confirmed renewal's send time plus the
/// lease, so before the server expires the key. The other process, waiting
/// all along, gets the lock at that expiry.
async fn stalled_holder_is_told_before_anyone_else_holds<K: Kind, O: Kind>(
    make: Make<K>,
    other: Make<O>,
) {
    let server = Server::start();
    let proxy = Proxy::start(server.port).await;
    let holder_client = client_through(&proxy, |c| c.lock_watchdog_timeout(WATCHDOG)).await;
    let other_client = server.client().await;
    let name = unique("stalled");
    let guard = make(&holder_client, &name).lock().await.unwrap();
    // Let a renewal or two land, then cut the holder off.
    tokio::time::sleep(WATCHDOG / 2).await;
    let lost = guard.lost();
    let waiter = {
        let lock = other(&other_client, &name);
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            (Instant::now(), guard)
        })
    };
    proxy.stall();
    let stalled_at = Instant::now();
    tokio::time::timeout(WATCHDOG * 2, lost)
        .await
        .expect("lost() fires within the lease");
    let lost_at = Instant::now();
    assert!(guard.is_lost());
    let (acquired_at, other_guard) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the other process gets the lock at the server-side expiry")
        .unwrap();
    let lateness = lost_at.saturating_duration_since(acquired_at);
    let lead = acquired_at.saturating_duration_since(lost_at);
    println!(
        "lost {:?} after the stall, {lead:?} before the other holder (lateness {lateness:?})",
        lost_at - stalled_at
    );
    assert!(
        lost_at <= acquired_at,
        "told {lateness:?} after another process took the lock"
    );
    assert!(
        lost_at - stalled_at <= WATCHDOG,
        "lost {:?} after the stall: later than the lease",
        lost_at - stalled_at
    );
    proxy.resume();
    other_guard.unlock().await.unwrap();
    drop(guard);
}

tests_of!(stalled_holder_is_told_before_anyone_else_holds:
    stalled_holder_rlock(rlock, rlock)
    stalled_holder_fair(fair, fair)
    stalled_holder_spin(spin, spin)
    stalled_holder_fenced(fenced, fenced)
    stalled_holder_write(write, write)
    stalled_holder_read(read, write)
);

/// The same under `CLIENT PAUSE` of the whole server: renewals are held
/// back, and the holder is told within the lease of its last renewal, not
/// a reply timeout after it. A lease taken by the caller is held to the
/// same rule.
#[tokio::test]
async fn holder_is_told_on_time_while_the_server_is_paused() {
    let fx = Fixture::with("paused", |c| c.lock_watchdog_timeout(WATCHDOG)).await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let guard = client.lock(name).unwrap().lock().await.unwrap();
    let leased = client
        .lock(&format!("{name}-leased"))
        .unwrap()
        .lock_with_lease(WATCHDOG)
        .await
        .unwrap();
    let leased_expiry = leased.expires_at().unwrap();
    let when = |lost: std::pin::Pin<
        Box<dyn std::future::Future<Output = redisson_lock::LostReason> + Send>,
    >| {
        tokio::spawn(async move {
            lost.await;
            Instant::now()
        })
    };
    let leased_lost = when(Box::pin(leased.lost()));
    tokio::time::sleep(WATCHDOG / 2).await;
    client_pause(raw, WATCHDOG * 2, PauseMode::Write).await;
    let paused_at = Instant::now();
    let lost_at = tokio::time::timeout(WATCHDOG * 2, when(Box::pin(guard.lost())))
        .await
        .expect("lost within the lease")
        .unwrap();
    assert!(lost_at - paused_at <= WATCHDOG, "{:?}", lost_at - paused_at);
    let leased_lost_at = tokio::time::timeout(WATCHDOG, leased_lost)
        .await
        .expect("a leased hold is lost at its lease")
        .unwrap();
    assert!(leased_lost_at.into_std() <= leased_expiry);
    drop((guard, leased));
}

/// How a test knows a waiter of some kind is waiting.
#[derive(Clone, Copy)]
enum Waits {
    /// It subscribed to `redisson_lock__channel:{N}` (RLock, fenced).
    LockChannel,
    /// It subscribed to `redisson_rwlock:{N}`.
    RwChannel,
    /// It joined the fair queue.
    Queue,
    /// No event to see (spin lock): give it a moment.
    Spinning,
}

/// Until the waiters (on a client other than the holder's) wait. On a
/// channel: two subscribers, the waiters' client and the holder's (its
/// hold's watch).
async fn until_waiting(raw: &fred::clients::Client, waits: Waits, name: &str, waiters: i64) {
    match waits {
        Waits::LockChannel => {
            wait_numsub(raw, &format!("redisson_lock__channel:{{{name}}}"), 2).await
        }
        Waits::RwChannel => wait_numsub(raw, &format!("redisson_rwlock:{{{name}}}"), 2).await,
        Waits::Queue => {
            let queue = format!("redisson_lock_queue:{{{name}}}");
            eventually("waiters queued", || async {
                raw.llen::<i64, _>(&queue).await.unwrap() == waiters
            })
            .await
        }
        Waits::Spinning => tokio::time::sleep(Duration::from_millis(200)).await,
    }
}

fn waiter_config(c: redisson_lock::Config) -> redisson_lock::Config {
    c.timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(100))
}

/// When the server dies under a waiter (the holder's TTL is 30 s):
/// * a waiter with a deadline keeps trying until it, then answers with a
///   typed transient error, neither `Ok(None)` nor late;
/// * a waiter without a time limit learns at once and fails with a
///   transient error once Redis has been unreachable for the retry budget
///   (`(timeout + retry_delay) × retry_attempts`, 2.4 s here), long before
///   the holder's TTL.
async fn server_dies_under_waiters<K: Kind, H: Kind>(make: Make<K>, holder: Make<H>, waits: Waits) {
    let mut server = Server::private();
    let holder_client = server.client().await;
    let waiter_client = server.client_with(waiter_config).await;
    let raw = server.raw().await;
    let name = unique("dead");
    let _held = holder(&holder_client, &name).lock().await.unwrap();
    let wait = Duration::from_secs(2);
    let bounded = {
        let lock = make(&waiter_client, &name);
        tokio::spawn(async move {
            let outcome = lock.try_lock_for(wait).await.map(|g| g.is_some());
            (outcome, Instant::now())
        })
    };
    let unbounded = {
        let lock = make(&waiter_client, &name);
        tokio::spawn(async move {
            let outcome = lock.lock().await.map(|_| true);
            (outcome, Instant::now())
        })
    };
    until_waiting(&raw, waits, &name, 2).await;
    server.kill();
    let killed_at = Instant::now();
    for (waiter, limit) in [(bounded, wait), (unbounded, Duration::from_secs(5))] {
        let (outcome, at) = tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("answers long before the holder's TTL")
            .unwrap();
        let err = outcome.expect_err("no server, no lock");
        assert!(err.is_transient(), "{err:?}");
        let took = at - killed_at;
        println!("waiter answered {took:?} after the server died");
        assert!(
            took < limit + Duration::from_millis(1_500),
            "answered after {took:?}"
        );
    }
}

/// `server` and a proxy in front of it.
async fn proxied(server: Server) -> (Server, Proxy) {
    let proxy = Proxy::start(server.port).await;
    (server, proxy)
}

/// A waiter's settings behind a stalling proxy: replies time out after
/// 300 ms, retries 100 ms apart.
fn impatient(c: redisson_lock::Config) -> redisson_lock::Config {
    c.timeout(Duration::from_millis(300))
        .retry_delay(Duration::from_millis(100))
}

/// One attempt that times out inside a long `try_lock_for` does not end the
/// wait: the attempt is undone (it may still run once the connection moves
/// again) and the waiter goes on, and takes the lock once it is free. Here
/// the waiter's requests are held back by a proxy for longer than its reply
/// timeout, right when the unlock message makes it try again.
#[tokio::test]
async fn a_timed_out_attempt_does_not_end_a_long_wait() {
    let (server, proxy) = proxied(Server::start()).await;
    let (raw, holder) = (server.raw().await, server.client().await);
    let waiter_client = client_through(&proxy, impatient).await;
    let name = unique("slow");
    let held = holder.lock(&name).unwrap().lock().await.unwrap();
    let lock = rlock(&waiter_client, &name);
    let waiter = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(20)).await });
    // The waiter's client, and the holder's (its hold's watch).
    wait_numsub(&raw, &format!("redisson_lock__channel:{{{name}}}"), 2).await;
    proxy.stall_to_server();
    held.unlock().await.unwrap(); // the waiter hears it and tries: held back
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    proxy.resume();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("answers")
        .unwrap()
        .expect("no error: time remained")
        .expect("acquired");
    let count: i64 = raw.hget(&name, guard.field()).await.unwrap();
    assert_eq!(count, 1, "held once, not re-entered by the late attempt");
    guard.unlock().await.unwrap();
    assert_eq!(raw.exists::<i64, _>(&name).await.unwrap(), 0);
}

/// Waiters keep waiting through a server restart and take the lock soon
/// after the server is back (its data, and so the old hold, is gone), long
/// before the old holder's 30 s TTL.
async fn server_restarts_under_waiters<K: Kind, H: Kind>(
    make: Make<K>,
    holder: Make<H>,
    waits: Waits,
) {
    let mut server = Server::private();
    let holder_client = server.client().await; // 30 s watchdog: the TTL a waiter would sleep
    let waiter_client = server.client_with(waiter_config).await;
    let raw = server.raw().await;
    let name = unique("restart");
    let _held = holder(&holder_client, &name).lock().await.unwrap();
    let mut waiters = Vec::new();
    for bounded in [true, false] {
        let lock = make(&waiter_client, &name);
        waiters.push(tokio::spawn(async move {
            let outcome = if bounded {
                lock.try_lock_for(Duration::from_secs(20)).await
            } else {
                lock.lock().await.map(Some)
            };
            let guard = outcome.unwrap().expect("acquired");
            let at = Instant::now();
            guard.unlock().await.unwrap();
            at
        }));
    }
    until_waiting(&raw, waits, &name, 2).await;
    drop(raw);
    server.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.start_again();
    let back_at = Instant::now();
    for waiter in waiters {
        let at = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("acquired after the restart")
            .unwrap();
        let stall = at.saturating_duration_since(back_at);
        println!("waiter took the lock {stall:?} after the server was back");
        assert!(stall < Duration::from_secs(5), "stalled {stall:?}");
    }
}

/// Per line, `dies, restarts: make, holder, waits;`: a test each of
/// [`server_dies_under_waiters`] and [`server_restarts_under_waiters`].
macro_rules! waiter_fault_tests {
    ($($dies:ident, $restarts:ident: $make:ident, $holder:ident, $waits:ident;)*) => {
        $(
            #[tokio::test]
            async fn $dies() {
                server_dies_under_waiters($make, $holder, Waits::$waits).await;
            }
            #[tokio::test]
            async fn $restarts() {
                server_restarts_under_waiters($make, $holder, Waits::$waits).await;
            }
        )*
    };
}

waiter_fault_tests! {
    server_dies_under_rlock_waiters, server_restarts_under_rlock_waiters: rlock, rlock, LockChannel;
    server_dies_under_fair_waiters, server_restarts_under_fair_waiters: fair, fair, Queue;
    server_dies_under_spin_waiters, server_restarts_under_spin_waiters: spin, spin, Spinning;
    server_dies_under_fenced_waiters, server_restarts_under_fenced_waiters: fenced, fenced, LockChannel;
    server_dies_under_read_waiters, server_restarts_under_read_waiters: read, write, RwChannel;
    server_dies_under_write_waiters, server_restarts_under_write_waiters: write, read, RwChannel;
}

/// A fair-lock waiter cancelled while its first attempt is in flight (here:
/// the script cache is empty, so the attempt is EVALSHA, NOSCRIPT, then
/// EVAL) leaves the queue after that attempt, never before it: no ghost
/// entry is left to block the lock for minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_fair_waiters_leave_no_ghost_even_while_scripts_reload() {
    let fx = Fixture::new("ghost").await;
    let (holder, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let waiter_client = fx.client().await;
    let lock = fair(&waiter_client, name);
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let held = fair(holder, name).lock().await.unwrap();
    let mut rng = rand::rng();
    for round in 0..400 {
        script_flush(raw).await;
        // Mostly while the first attempt (EVALSHA, NOSCRIPT, EVAL) is in flight.
        let cancel_after = Duration::from_micros(rng.random_range(0..600));
        let attempt = lock.try_lock_for(Duration::from_secs(60));
        let outcome = tokio::time::timeout(cancel_after, attempt).await;
        assert!(
            matches!(outcome, Err(_) | Ok(Ok(None))),
            "round {round}: {outcome:?}"
        );
    }
    eventually("every cancelled waiter left the queue", || async {
        let len: i64 = raw.llen(&queue).await.unwrap();
        let card: i64 = raw.zcard(&timeouts).await.unwrap();
        len == 0 && card == 0
    })
    .await;
    held.unlock().await.unwrap();
    let guard = lock.try_lock().await.unwrap();
    assert!(guard.is_some(), "the free lock is not blocked by a ghost");
}

/// A cancelled fair waiter whose client cannot reach Redis keeps trying to
/// leave the queue, and does so once the connection is back.
#[tokio::test]
async fn fair_queue_leave_is_retried_until_the_connection_is_back() {
    let (server, proxy) = proxied(Server::start()).await;
    let (raw, holder) = (server.raw().await, server.client().await);
    let waiter_client = client_through(&proxy, |c| impatient(c).retry_attempts(1)).await;
    let name = unique("leave");
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let held = fair(&holder, &name).lock().await.unwrap();
    let lock = fair(&waiter_client, &name);
    let waiter = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(60)).await });
    eventually("the waiter queued", || async {
        raw.llen::<i64, _>(&queue).await.unwrap() == 1
    })
    .await;
    proxy.refuse(true);
    proxy.cut();
    proxy.wait_connections(0, Duration::from_secs(5)).await;
    waiter.abort();
    let _ = waiter.await;
    // Unreachable for longer than `retry_attempts` retries take: the entry
    // stays (nothing could remove it)...
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(raw.llen::<i64, _>(&queue).await.unwrap(), 1);
    // ...and is removed once the client reconnects.
    proxy.refuse(false);
    eventually("the waiter left the queue", || async {
        raw.llen::<i64, _>(&queue).await.unwrap() == 0
    })
    .await;
    held.unlock().await.unwrap();
}

/// A lost connection is a transient error, and what is idempotent is
/// retried through it: an unlock, and the background unlock of a dropped
/// guard, both succeed across a cut connection, long before the TTL.
#[tokio::test]
async fn unlocks_are_retried_across_a_cut_connection() {
    let server = Server::start();
    let proxy = Proxy::start(server.port).await;
    let raw = server.raw().await;
    let client = client_through(&proxy, |c| {
        c.timeout(Duration::from_millis(500))
            .retry_delay(Duration::from_millis(100))
    })
    .await;
    let name = unique("cut");
    let lock = client.lock(&name).unwrap();

    let guard = lock.lock().await.unwrap();
    proxy.cut();
    guard.unlock().await.expect("unlock retried after the cut");
    assert_eq!(raw.exists::<i64, _>(&name).await.unwrap(), 0);

    let guard = lock.lock().await.unwrap();
    proxy.cut();
    drop(guard);
    eventually("the dropped guard's unlock went through", || async {
        raw.exists::<i64, _>(&name).await.unwrap() == 0
    })
    .await;

    // With no retries at all, the error says it is transient.
    let once = client_through(&proxy, |c| c.retry_attempts(0)).await;
    proxy.refuse(true);
    proxy.cut();
    proxy.wait_connections(0, Duration::from_secs(5)).await;
    let err = once.lock(&name).unwrap().is_locked().await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(
        matches!(err, Error::Connection(_) | Error::Timeout(_)),
        "{err:?}"
    );
}

/// Redisson's fair-lock `testLeaseTimeout` shape: holders with short leases
/// that never unlock. Each lease expiry hands the lock to the next waiter
/// in line without any publish, so every waiter must get its turn within
/// about one lease of the previous one, not sleep toward a queue deadline.
#[tokio::test]
async fn fair_lock_hands_over_at_every_lease_expiry() {
    let fx = Fixture::new("leases").await;
    let (clients, name) = ([fx.client.clone(), fx.client().await], &fx.name);
    let lease = Duration::from_millis(300);
    let first = fair(&clients[0], name)
        .lock_with_lease(lease)
        .await
        .unwrap();
    std::mem::forget(first);
    let started = Instant::now();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..8 {
        let lock = fair(&clients[i % 2], name);
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock_with_lease(lease).await.unwrap();
            order.lock().push(Instant::now());
            std::mem::forget(guard); // never unlocked: only the lease ends it
        }));
    }
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("every waiter gets its turn")
            .unwrap();
    }
    let times = order.lock().clone();
    let total = started.elapsed();
    println!("8 lease-expiry handovers in {total:?}");
    let mut previous = started;
    for at in times {
        let gap = at - previous;
        assert!(gap < lease + Duration::from_millis(400), "gap {gap:?}");
        previous = at;
    }
}
