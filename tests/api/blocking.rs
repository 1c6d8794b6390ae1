//! The blocking API: reentrant per OS thread, refuses to run inside a runtime.
#![cfg(feature = "blocking")]
use std::time::Duration;

use crate::common::{unique, wait_numsub_blocking, Server};
use redisson_lock::blocking::BlockingClient;
use redisson_lock::{Config, Error};

#[test]
fn reentrant_per_thread_and_exclusive_across_threads() {
    let server = Server::start();
    let client = BlockingClient::connect_with(Config::from_url(&server.url).unwrap()).unwrap();
    let name = unique("blocking");
    let lock = client.lock(&name).unwrap();

    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());

    let other = client.clone();
    let name2 = name.clone();
    let (held_elsewhere, got) = std::thread::spawn(move || {
        let lock = other.lock(&name2).unwrap();
        let held = lock.is_held_by_current_thread().unwrap();
        let got = lock
            .try_lock_for(Duration::from_millis(100))
            .unwrap()
            .is_some();
        (held, got)
    })
    .join()
    .unwrap();
    assert!(!held_elsewhere);
    assert!(!got, "another thread must not get a held lock");

    drop(inner); // synchronous unlock of one hold
    assert_eq!(lock.hold_count().unwrap(), 1);
    outer.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());

    // Another thread waits and is woken by our unlock.
    let guard = lock.lock().unwrap();
    let waiter = std::thread::spawn({
        let client = client.clone();
        let name = name.clone();
        move || {
            client
                .lock(&name)
                .unwrap()
                .try_lock_for(Duration::from_secs(20))
                .unwrap()
                .map(|g| g.unlock())
        }
    });
    // Unlock once the waiter is subscribed, so it is woken by the publish.
    let channel = client.as_async().lock(&name).unwrap().channel().to_string();
    wait_numsub_blocking(&server, &channel, 1);
    guard.unlock().unwrap();
    assert!(matches!(waiter.join().unwrap(), Some(Ok(()))));
}

#[test]
fn refuses_to_block_inside_a_runtime() {
    let server = Server::start();
    let client = BlockingClient::connect(&server.url).unwrap();
    let lock = client.lock(&unique("in-runtime")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert!(matches!(lock.try_lock(), Err(Error::BlockingInAsync)));
        assert!(matches!(
            BlockingClient::connect(&server.url),
            Err(Error::BlockingInAsync)
        ));
    });
}

#[test]
fn async_client_offers_a_blocking_view() {
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = runtime
        .block_on(redisson_lock::Client::connect(&server.url))
        .unwrap();
    let blocking = client.blocking().unwrap();
    let lock = blocking.lock(&unique("view")).unwrap();
    let guard = lock.lock_with_lease(Duration::from_secs(5)).unwrap();
    assert!(lock.is_locked().unwrap());
    guard.unlock().unwrap();
}

#[test]
fn every_kind_has_a_blocking_form() {
    let server = Server::start();
    let client = BlockingClient::connect(&server.url).unwrap();
    let base = unique("kinds");

    let fair = client.fair_lock(&format!("{base}-fair")).unwrap();
    let a = fair.lock().unwrap();
    let b = fair.lock().unwrap(); // same thread re-enters
    assert_eq!(fair.hold_count().unwrap(), 2);
    drop(b);
    a.unlock().unwrap();

    let fenced = client.fenced_lock(&format!("{base}-fenced")).unwrap();
    let g1 = fenced.lock().unwrap();
    let t1 = g1.fencing_token();
    g1.unlock().unwrap();
    let g2 = fenced.try_lock().unwrap().unwrap();
    assert!(g2.fencing_token() > t1);
    drop(g2);

    let spin = client.spin_lock(&format!("{base}-spin")).unwrap();
    spin.try_lock_for(Duration::from_millis(50))
        .unwrap()
        .unwrap()
        .unlock()
        .unwrap();
    let constant = redisson_lock::BackOff::Constant(Duration::from_millis(5));
    let spin = client
        .spin_lock_with(&format!("{base}-spin"), constant)
        .unwrap();
    spin.lock().unwrap().unlock().unwrap();
    // A blocking guard tells what an async one does.
    let leased = spin
        .try_lock_for_with_lease(Duration::ZERO, Duration::from_secs(5))
        .unwrap()
        .unwrap();
    assert_eq!(leased.name(), spin.name());
    assert_eq!(leased.lease(), Some(Duration::from_secs(5)));
    let left = leased.expires_at().unwrap() - std::time::Instant::now();
    assert!(
        left > Duration::from_secs(4) && left <= Duration::from_secs(5),
        "{left:?}"
    );
    assert_eq!(
        spin.lock().unwrap().owner(),
        leased.owner(),
        "the thread's owner"
    );
    leased.unlock().unwrap();

    let members: Vec<_> = (0..3)
        .map(|i| client.as_async().lock(&format!("{base}-m{i}")).unwrap())
        .collect();
    let multi = client.wrap_multi(redisson_lock::MultiLock::new(members.clone()).unwrap());
    let guard = multi.lock().unwrap();
    assert!(client
        .lock(&format!("{base}-m1"))
        .unwrap()
        .is_locked()
        .unwrap());
    guard.unlock().unwrap();
    assert!(!client
        .lock(&format!("{base}-m2"))
        .unwrap()
        .is_locked()
        .unwrap());
}

/// Dropping a blocking guard while Redis holds back writes blocks the
/// thread one command timeout at most (before: until every retry was spent
/// or the pause ended); the release then finishes in the background, and
/// the lock is free once Redis answers again.
#[test]
fn dropping_a_guard_while_redis_is_paused_blocks_one_timeout_at_most() {
    use crate::common::fault::{client_pause, client_unpause, PauseMode};
    let server = Server::private();
    let timeout = Duration::from_millis(500);
    let config = Config::from_url(&server.url).unwrap().timeout(timeout);
    let client = BlockingClient::connect_with(config).unwrap();
    let lock = client.lock(&unique("blocking-drop-paused")).unwrap();
    let guard = lock.lock().unwrap();
    let probe = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let raw = probe.block_on(server.raw());
    probe.block_on(client_pause(&raw, Duration::from_secs(5), PauseMode::Write));

    let start = std::time::Instant::now();
    drop(guard);
    let took = start.elapsed();
    probe.block_on(client_unpause(&raw));
    assert!(
        took < timeout * 3,
        "drop blocked {took:?}, more than one command timeout ({timeout:?}) and a margin"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while lock.is_locked().unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the background release never freed the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `BlockingClient::shutdown`: a guard's release still under way when it is
/// called reaches Redis (nothing is left held), and every later call is
/// `Error::Closed`; inside a runtime it refuses, doing nothing.
#[test]
fn shutdown_finishes_releases_and_closes() {
    let server = Server::start();
    let client = BlockingClient::connect_with(Config::from_url(&server.url).unwrap()).unwrap();
    let name = unique("blocking-shutdown");
    let lock = client.lock(&name).unwrap();
    let guard = lock.lock().unwrap();
    assert!(lock.is_locked().unwrap());
    // Released in the background (dropped inside a runtime), then shut down.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        assert!(matches!(client.shutdown(), Err(Error::BlockingInAsync)));
        drop(guard);
    });
    client.shutdown().unwrap();
    client.shutdown().unwrap();
    assert!(matches!(lock.is_locked(), Err(Error::Closed)));
    let other = BlockingClient::connect_with(Config::from_url(&server.url).unwrap()).unwrap();
    assert!(!other.lock(&name).unwrap().is_locked().unwrap(), "released");
    other.shutdown().unwrap();
}

/// A blocking guard stays on its thread (`!Send`, checked by the compiler:
/// moving one into `std::thread::spawn` does not compile) but, like std's
/// `MutexGuard`, may be looked at from other threads (`Sync`).
#[test]
fn a_blocking_guard_is_sync() {
    fn sync<T: Sync>() {}
    sync::<redisson_lock::blocking::BlockingGuard<redisson_lock::Reentrant>>();
}

/// A handle wrapped with an explicit owner keeps it: every thread acts as
/// that owner (re-entering its hold), not as itself.
#[test]
fn a_wrapped_explicit_owner_is_kept() {
    let server = Server::start();
    let client = BlockingClient::connect_with(Config::from_url(&server.url).unwrap()).unwrap();
    let name = unique("blocking-owner");
    let owner = redisson_lock::Owner::new(7);
    let lock = client.wrap(client.as_async().lock(&name).unwrap().with_owner(owner));
    let guard = lock.lock().unwrap();
    assert_eq!(guard.owner(), owner);
    let elsewhere = lock.clone();
    let (count, held) = std::thread::spawn(move || {
        let again = elsewhere
            .try_lock()
            .unwrap()
            .expect("the same owner re-enters");
        let seen = (
            elsewhere.hold_count().unwrap(),
            elsewhere.is_held_by_current_thread().unwrap(),
        );
        again.unlock().unwrap();
        seen
    })
    .join()
    .unwrap();
    assert_eq!((count, held), (2, true));
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

/// The blocking `run` takes the lock, runs the work on the calling thread
/// and releases it; a lock lost while the work ran ends the call with
/// `Error::Lost`, its result discarded.
#[test]
fn blocking_run_releases_and_reports_a_loss() {
    let server = Server::start();
    let client = BlockingClient::connect_with(Config::from_url(&server.url).unwrap()).unwrap();
    let lock = client.lock(&unique("blocking-run")).unwrap();
    assert_eq!(
        lock.run(|guard| guard.name().len()).unwrap(),
        lock.name().len()
    );
    assert!(!lock.is_locked().unwrap());
    let forced = client.lock(lock.name()).unwrap();
    let outcome = lock.run(|guard| {
        // Another handle's forced unlock (any thread may force): the guard
        // is told at once.
        let forced = forced.clone();
        std::thread::spawn(move || assert!(forced.force_unlock().unwrap()))
            .join()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !guard.is_lost() {
            assert!(
                std::time::Instant::now() < deadline,
                "the forced unlock heard"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        "discarded"
    });
    assert!(matches!(outcome, Err(Error::Lost { .. })), "{outcome:?}");
    assert!(!lock.is_locked().unwrap());
}
