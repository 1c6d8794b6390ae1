//! The 0.1 API: what each kind's types allow, and the Redisson calls a Java
//! user looks for (unlock by owner, shutdown, the non-reentrant lock,
//! forget, name mapping, downgrade, multi-lock state), against a real
//! `redis-server`, checked in Redis.
mod common;

#[path = "api/blocking.rs"]
mod blocking;
#[path = "api/events.rs"]
mod events;

use std::time::Duration;

use common::{eventually, unique, wait_numsub, Fixture};
use fred::prelude::*;
#[cfg(feature = "blocking")]
use redisson_lock::blocking::{
    BlockingClient, BlockingGuard, BlockingLock, BlockingMultiGuard, BlockingMultiLock,
};
use redisson_lock::{
    AnyKind, BackOff, Cause, Client, Config, Error, Fair, Fenced, Lock, LockGuard, MultiGuard,
    MultiLock, NonReentrant, NonReentrantFair, Owner, PrefixMapper, Read, ReadWriteLock, Reentrant,
    Spin, Ttl, Write,
};

/// Every public type can cross threads and be printed.
#[test]
fn public_types_are_send_sync_and_debug() {
    fn check<T: Send + Sync + std::fmt::Debug>() {}
    /// `each!(f: T…)` calls `f::<T>()` for every type.
    macro_rules! each {
        ($f:ident: $($t:ty),*) => {
            $($f::<$t>();)*
        };
    }
    each!(check: Client, Config, Error, Cause, Owner, Ttl, BackOff, PrefixMapper);
    each!(check: ReadWriteLock, MultiLock, MultiGuard);
    #[cfg(feature = "blocking")]
    {
        check::<BlockingClient>();
        check::<BlockingMultiLock>();
        check::<BlockingMultiGuard>();
    }
    fn kind<K: redisson_lock::Kind>() {
        check::<K>();
        check::<Lock<K>>();
        check::<LockGuard<K>>();
        #[cfg(feature = "blocking")]
        check::<BlockingLock<K>>();
    }
    each!(kind: Reentrant, NonReentrant, Fair, NonReentrantFair, Read, Write, Spin, Fenced);
    each!(kind: AnyKind);
    // A blocking guard belongs to its thread: Debug, but neither Send nor Sync.
    #[cfg(feature = "blocking")]
    {
        fn debug<T: std::fmt::Debug>() {}
        debug::<BlockingGuard<Reentrant>>();
    }
}

/// `Debug` and errors never show the password.
#[test]
fn secrets_stay_out_of_debug_and_errors() {
    let config = Config::from_url("redis://user:s3cr3t-pw@127.0.0.1:6379/2").unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains("s3cr3t-pw"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let err = Config::from_url("redis://user:s3cr3t-pw@[bad").unwrap_err();
    assert!(!format!("{err} {err:?}").contains("s3cr3t-pw"), "{err:?}");
}

/// An error's text says its cause once: no `source()` repeating it (a
/// chain printed with its sources reads once), and fred's error is still
/// there for code that wants it.
#[test]
fn an_error_chain_reads_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A refused connection (a free loopback port nobody listens on).
    let refused = rt
        .block_on(Client::connect_with(
            Config::from_url(&format!("redis://127.0.0.1:{}", common::free_port()))
                .unwrap()
                .timeout(Duration::from_millis(500)),
        ))
        .unwrap_err();
    assert!(std::error::Error::source(&refused).is_none(), "{refused:?}");
    let text = refused.to_string();
    assert_eq!(text.matches("Connection refused").count(), 1, "{text}");
    let Error::Connection(cause) = &refused else {
        panic!("a connection error: {refused:?}");
    };
    assert!(cause.redis_error().is_some(), "{refused:?}");
    assert!(std::error::Error::source(cause).is_none());
    // What a `main` returning `Result` prints (`Debug`) reads as a sentence
    // with what to check, not as the structures underneath.
    let printed = format!("{refused:?}");
    assert!(
        printed.starts_with("Connection(Redis connection error at 127.0.0.1:"),
        "{printed}"
    );
    assert!(printed.contains("is the server up"), "{printed}");
    assert!(!printed.contains("Cause {"), "{printed}");
    let printed = format!("{:?}", Error::BlockingInAsync);
    assert!(
        printed.starts_with("BlockingInAsync(blocking lock call"),
        "{printed}"
    );
    assert!(printed.contains("spawn_blocking"), "{printed}");
}

/// Java's `lock.unlock()` without a guard: an explicit owner releases its
/// hold by itself (a handle without an owner has no `unlock`: the doc test
/// on `OwnedLock` checks that it does not compile).
#[tokio::test]
async fn unlock_by_an_explicit_owner() {
    let fx = Fixture::new("by-owner").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let worker = lock.with_owner(Owner::new(42));
    worker.lock().await.unwrap().forget();
    worker.lock().await.unwrap().forget();
    assert_eq!(lock.hold_count(Owner::new(42)).await.unwrap(), 2);
    worker.unlock().await.unwrap();
    assert_eq!(lock.hold_count(Owner::new(42)).await.unwrap(), 1);
    worker.unlock().await.unwrap();
    assert!(!fx.exists(&fx.name).await);
    assert!(matches!(worker.unlock().await, Err(Error::NotHeld { .. })));
    // Another owner cannot release it.
    worker.lock().await.unwrap().forget();
    assert!(matches!(
        lock.with_owner(Owner::new(7)).unlock().await,
        Err(Error::NotHeld { .. })
    ));
    worker.unlock().await.unwrap();
}

/// A thread that holds a blocking lock releases it by itself, as in Java.
#[cfg(feature = "blocking")]
#[test]
fn unlock_by_the_blocking_thread() {
    let server = common::Server::start();
    let client = BlockingClient::connect(&server.url).unwrap();
    let lock = client.lock(&unique("thread")).unwrap();
    lock.lock().unwrap().forget();
    lock.lock().unwrap().forget(); // re-entered by the same thread
    assert_eq!(lock.hold_count().unwrap(), 2);
    lock.unlock().unwrap();
    lock.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));
    // Another thread does not hold it and cannot release it.
    lock.lock().unwrap().forget();
    let other = lock.clone();
    let refused = std::thread::spawn(move || other.unlock()).join().unwrap();
    assert!(matches!(refused, Err(Error::NotHeld { .. })));
    lock.unlock().unwrap();
}

/// Redisson 4.7's non-reentrant lock: RLock's hash and channel, exclusion
/// with RLocks of the same name, and re-entry refused with nothing written.
#[tokio::test]
async fn non_reentrant_lock_wire_state_and_exclusion() {
    let fx = Fixture::new("non-reentrant").await;
    let (a, b, raw, name) = (&fx.client, fx.client().await, &fx.raw, &fx.name);
    let lock = a.non_reentrant_lock(name).unwrap();
    let mine = lock.with_owner(Owner::new(3));
    let guard = mine.lock().await.unwrap();
    let field = guard.field().to_owned();
    assert_eq!(field, format!("{}:3", a.id()));
    let fields: std::collections::HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(fields, [(field.clone(), 1)].into_iter().collect());
    let pttl = fx.pttl(name).await;
    assert!((1..=30_000).contains(&pttl), "{pttl}");
    assert!(matches!(
        mine.try_lock().await,
        Err(Error::NotReentrant { .. })
    ));
    assert_eq!(raw.hget::<i64, _, _>(name, &field).await.unwrap(), 1);
    // An RLock of the same name, on another client, waits for it.
    assert!(b.lock(name).unwrap().try_lock().await.unwrap().is_none());
    let waiter = {
        let rlock = b.lock(name).unwrap();
        tokio::spawn(async move { rlock.lock().await })
    };
    // The waiter's client, and the holder's (its hold's watch).
    wait_numsub(raw, &format!("redisson_lock__channel:{{{name}}}"), 2).await;
    guard.unlock().await.unwrap(); // publishes 0: the RLock waiter wakes
    let taken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by publish")
        .unwrap()
        .unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    taken.unlock().await.unwrap();
}

/// A name mapper prefixes the key of every kind, and so every key and
/// channel derived from it, as Redisson's `NameMapper` does.
#[tokio::test]
async fn name_mapper_applies_to_every_kind() {
    let tenant = format!("{}:", unique("tenant"));
    let fx = Fixture::with("mapped", |c| {
        c.name_mapper(PrefixMapper::new(tenant.clone()))
    })
    .await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let mapped = format!("{tenant}{name}");

    let g = client.lock(name).unwrap().lock().await.unwrap();
    assert_eq!(g.name(), mapped);
    assert!(fx.exists(&mapped).await);
    assert!(!fx.exists(name).await);
    g.unlock().await.unwrap();

    let fenced = client.fenced_lock(name).unwrap();
    fenced.lock().await.unwrap().unlock().await.unwrap();
    assert!(
        fx.exists(&format!("redisson_lock_token:{{{mapped}}}"))
            .await
    );

    let rw = client.read_write_lock(name).unwrap();
    let r = rw.read().lock().await.unwrap();
    let mode: String = raw.hget(&mapped, "mode").await.unwrap();
    assert_eq!(mode, "read");
    assert!(
        fx.exists(&format!("{{{mapped}}}:{}:rwlock_timeout:1", r.field()))
            .await
    );
    // A writer waits on the mapped channel.
    let writer = {
        let w = rw.write();
        tokio::spawn(async move { w.lock().await })
    };
    wait_numsub(raw, &format!("redisson_rwlock:{{{mapped}}}"), 1).await;
    r.unlock().await.unwrap();
    let w = tokio::time::timeout(Duration::from_secs(5), writer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    w.unlock().await.unwrap();

    let fair = client.fair_lock(name).unwrap();
    let holder = fair.lock().await.unwrap();
    let queued = {
        let fair = fair.clone();
        tokio::spawn(async move { fair.lock().await })
    };
    let queue = format!("redisson_lock_queue:{{{mapped}}}");
    eventually("the waiter queued under the mapped name", || async {
        raw.llen::<i64, _>(&queue).await.unwrap() == 1
    })
    .await;
    assert!(
        fx.exists(&format!("redisson_lock_timeout:{{{mapped}}}"))
            .await
    );
    holder.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), queued)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let spin = client.spin_lock(name).unwrap().lock().await.unwrap();
    assert!(fx.exists(&mapped).await);
    spin.unlock().await.unwrap();
    let nr = client
        .non_reentrant_lock(name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    assert!(fx.exists(&mapped).await);
    nr.unlock().await.unwrap();

    // Nothing was ever written under the unmapped name.
    let stray: Vec<String> = raw
        .custom(fred::cmd!("KEYS"), vec![format!("*{name}*")])
        .await
        .unwrap();
    assert!(
        stray.iter().all(|k| k.contains(&tenant)),
        "keys without the prefix: {stray:?}"
    );
}

/// `forget` keeps the hold in Redis without unlocking, stops renewing it,
/// and it ends with its lease.
#[tokio::test]
async fn forget_keeps_the_hold_until_its_lease_ends() {
    let fx = Fixture::with("forget", |c| {
        c.lock_watchdog_timeout(Duration::from_millis(600))
    })
    .await;
    let lock = fx.client.lock(&fx.name).unwrap();
    lock.lock().await.unwrap().forget();
    assert!(lock.is_locked().await.unwrap());
    eventually("the forgotten hold expired, not renewed", || async {
        !fx.exists(&fx.name).await
    })
    .await;
    let leased = lock.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    leased.forget();
    let pttl = fx.pttl(&fx.name).await;
    assert!(pttl > 29_000, "{pttl}");
}

/// A write guard downgrades to a read guard of the same owner: the hash
/// is read-mode with that owner as reader, and a waiting reader wakes at
/// once (the downgrade publishes).
#[tokio::test]
async fn write_guard_downgrades_and_wakes_readers() {
    let fx = Fixture::new("downgrade").await;
    let (a, b, raw, name) = (&fx.client, fx.client().await, &fx.raw, &fx.name);
    let write = a
        .read_write_lock(name)
        .unwrap()
        .write()
        .lock()
        .await
        .unwrap();
    let reader = {
        let read = b.read_write_lock(name).unwrap().read();
        tokio::spawn(async move { read.lock().await })
    };
    // The reader's client, and the writer's (its hold's watch).
    wait_numsub(raw, &format!("redisson_rwlock:{{{name}}}"), 2).await;
    let owner = write.owner();
    let read = write.downgrade().await.unwrap();
    assert_eq!(read.owner(), owner);
    let mode: String = raw.hget(name, "mode").await.unwrap();
    assert_eq!(mode, "read");
    assert_eq!(raw.hget::<i64, _, _>(name, read.field()).await.unwrap(), 1);
    let what = "the waiting reader woke long before any TTL";
    let other = common::within(Duration::from_secs(5), what, reader).await;
    let other = other.unwrap();
    read.unlock().await.unwrap();
    other.unlock().await.unwrap();
    assert!(!fx.exists(name).await);
}

/// A multi-lock says whether it is locked and whether its guard still
/// holds.
#[tokio::test]
async fn multi_lock_state() {
    let fx = Fixture::new("m").await;
    let names = [format!("{}-1", fx.name), format!("{}-2", fx.name)];
    let multi = MultiLock::new(names.iter().map(|n| fx.client.lock(n).unwrap())).unwrap();
    assert!(!multi.is_locked().await.unwrap());
    let guard = multi.lock().await.unwrap();
    assert!(multi.is_locked().await.unwrap());
    assert!(guard.is_held().await.unwrap());
    let _: i64 = fx.raw.del(&names[0]).await.unwrap();
    assert!(!guard.is_held().await.unwrap());
    assert!(!multi.is_locked().await.unwrap());
    drop(guard);
}

/// The blocking multi-lock takes a lease and says whether it is locked.
#[cfg(feature = "blocking")]
#[test]
fn blocking_multi_lock_with_a_lease() {
    let server = common::Server::start();
    let client = BlockingClient::connect(&server.url).unwrap();
    let names = [unique("bm1"), unique("bm2")];
    let members = names.iter().map(|n| client.as_async().lock(n).unwrap());
    let multi = client.wrap_multi(MultiLock::new(members).unwrap());
    assert!(!multi.is_locked().unwrap());
    let guard = multi.lock_with_lease(Duration::from_secs(20)).unwrap();
    assert!(multi.is_locked().unwrap());
    assert!(guard.is_held().unwrap());
    for name in &names {
        let lock = client.lock(name).unwrap();
        match lock.remain_time_to_live().unwrap() {
            Ttl::Expires(ttl) => assert!(ttl > Duration::from_secs(19), "{ttl:?}"),
            other => panic!("{other:?}"),
        }
    }
    guard.unlock().unwrap();
    assert!(!multi.is_locked().unwrap());
}

/// Shutdown, like Java's `redisson.shutdown()`: waiters get `Error::Closed`
/// at once, renewals stop (held locks expire with their lease and their
/// guards see `lost()`), releases under way finish, both connections close
/// although guards still exist, and everything afterwards is `Closed`.
#[tokio::test]
async fn shutdown_with_guards_waiters_and_late_drops() {
    let fx = Fixture::with("shutdown", |c| {
        c.lock_watchdog_timeout(Duration::from_millis(900))
    })
    .await;
    let (client, other, raw) = (&fx.client, fx.client().await, &fx.raw);
    let connections = || async {
        let list: String = raw
            .custom(fred::cmd!("CLIENT"), vec!["LIST"])
            .await
            .unwrap();
        list.lines().count()
    };
    let before = connections().await;
    let (held, busy, dropped) = (unique("held"), unique("busy"), unique("dropped"));
    let guard = client.lock(&held).unwrap().lock().await.unwrap();
    let lost = guard.lost();
    let late = unique("late");
    let late_guard = client
        .lock(&late)
        .unwrap()
        .lock_with_lease(Duration::from_millis(1_500))
        .await
        .unwrap();
    let _busy = other.lock(&busy).unwrap().lock().await.unwrap();
    let waiter = {
        let lock = client.fair_lock(&busy).unwrap();
        tokio::spawn(async move { lock.lock().await })
    };
    let queue = format!("redisson_lock_queue:{{{busy}}}");
    eventually("the waiter queued", || async {
        raw.llen::<i64, _>(&queue).await.unwrap() == 1
    })
    .await;
    // A guard dropped just before: its release is under way and finishes.
    drop(client.lock(&dropped).unwrap().lock().await.unwrap());

    tokio::time::timeout(Duration::from_secs(10), client.shutdown())
        .await
        .expect("shutdown ends in bounded time");
    assert!(client.is_shut_down());
    let outcome = tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("the waiter answered at once")
        .unwrap();
    assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
    assert!(!fx.exists(&dropped).await);
    eventually("the cancelled waiter left the queue", || async {
        raw.llen::<i64, _>(&queue).await.unwrap() == 0
    })
    .await;
    eventually("both connections closed, guards or not", || async {
        connections().await <= before - 2
    })
    .await;
    // Not renewed any more: the held lock expires, and its guard is told.
    tokio::time::timeout(Duration::from_secs(3), lost)
        .await
        .expect("lost() fires once the lease can have run out");
    eventually("the held lock expired", || async {
        !fx.exists(&held).await
    })
    .await;
    // Everything afterwards: Closed, and a late drop neither panics nor
    // hangs; its lock is left to its lease.
    drop(late_guard);
    assert_eq!(raw.exists::<i64, _>(&late).await.unwrap(), 1);
    eventually("the late-dropped guard's lock expired", || async {
        raw.exists::<i64, _>(&late).await.unwrap() == 0
    })
    .await;
    assert!(matches!(guard.unlock().await, Err(Error::Closed)));
    let lock = client.lock(&unique("after")).unwrap();
    assert!(matches!(lock.try_lock().await, Err(Error::Closed)));
    assert!(matches!(lock.is_locked().await, Err(Error::Closed)));
    client.shutdown().await; // idempotent
}

/// Every waiter's future is part of the caller's task for as long as it
/// waits, and is most of a waiter's memory (BENCHMARKS.md, 5a: about 1.5 KB
/// per waiter in all, Java Redisson's figure): each stays under 1 KB (608
/// bytes for `lock()` since issue 35; fred's own command futures are 5 to
/// 16 KB, and a latch awaiter once carried several, 21 KB).
#[tokio::test]
async fn waiting_futures_stay_small() {
    let fx = Fixture::new("sizes").await;
    let wait = Duration::from_secs(1);
    let lock = fx.client.lock(&fx.name).unwrap();
    let fair = fx.client.fair_lock(&fx.name).unwrap();
    let semaphore = fx.client.semaphore(&fx.name).unwrap();
    let permits = fx.client.permit_expirable_semaphore(&fx.name).unwrap();
    let latch = fx.client.count_down_latch(&fx.name).unwrap();
    let other = fx.client.lock(&format!("{}:held", fx.name)).unwrap();
    let guard = other.lock().await.unwrap();
    let unlock_size = std::mem::size_of_val(&guard.unlock());
    let sizes = [
        ("unlock", unlock_size),
        ("lock()", std::mem::size_of_val(&lock.lock())),
        (
            "try_lock_for",
            std::mem::size_of_val(&lock.try_lock_for(wait)),
        ),
        ("fair lock()", std::mem::size_of_val(&fair.lock())),
        (
            "semaphore acquire",
            std::mem::size_of_val(&semaphore.acquire(1)),
        ),
        (
            "permit acquire",
            std::mem::size_of_val(&permits.acquire(None)),
        ),
        (
            "latch await_zero",
            std::mem::size_of_val(&latch.await_zero()),
        ),
    ];
    for (what, size) in sizes {
        println!("{what}: {size} bytes");
        assert!(size < 1024, "{what}'s future is {size} bytes");
    }
}

/// `Config::client_id`: a client made with another's id acts for it, e.g.
/// to release the hold of a process known to be gone (what the CLI's
/// guardian does): its owner fields are `<that id>:<owner>`, and its unlock
/// with the owner takes the dead client's hold away and publishes.
#[tokio::test]
async fn a_client_made_with_another_ids_releases_its_hold() {
    let fx = Fixture::new("client-id").await;
    let dead = fx.client().await;
    let owner = redisson_lock::Owner::new(9);
    let lock = dead.lock(&fx.name).unwrap().with_owner(owner);
    let guard = lock.lock().await.unwrap();
    let field = guard.field().to_owned();
    guard.forget();
    let id = uuid::Uuid::parse_str(field.rsplit_once(':').unwrap().0).unwrap();
    let heir = fx.client_with(|c| c.client_id(id)).await;
    let theirs = heir.lock(&fx.name).unwrap().with_owner(owner);
    assert_eq!(theirs.owner_field(owner), field);
    let mut unlocks = fx
        .listen(&format!("redisson_lock__channel:{{{}}}", fx.name))
        .await;
    theirs.unlock().await.unwrap();
    assert_eq!(unlocks.next().await.value.as_string().as_deref(), Some("0"));
    assert!(!fx.exists(&fx.name).await);
}

/// The client registry (docs/PROTOCOL.md §9.6): a client says who it is
/// under `redisson_lock_client:<id>` once connected, keeps it alive, and
/// removes it at shutdown.
#[tokio::test]
async fn a_client_registers_who_it_is_and_unregisters_at_shutdown() {
    let fx = Fixture::new("registry").await;
    let client = fx
        .client_with(|c| {
            c.client_name("orders-svc")
                .lock_watchdog_timeout(Duration::from_secs(3))
        })
        .await;
    let key = redisson_lock::layout::client_key(&client.id().hyphenated().to_string());
    let raw = fx.raw.clone();
    let read = || {
        let (raw, key) = (raw.clone(), key.clone());
        async move {
            let value: Option<String> = raw.get(&key).await.unwrap();
            let pttl: i64 = raw.pttl(&key).await.unwrap();
            (value, pttl)
        }
    };
    eventually("registered", || async { read().await.0.is_some() }).await;
    let (value, pttl) = read().await;
    let value = value.unwrap();
    let lines: Vec<&str> = value.lines().collect();
    assert_eq!(lines.len(), 5, "{value}");
    assert!(
        lines[0].starts_with("host=") && lines[0].len() > 5,
        "{value}"
    );
    assert_eq!(lines[1], format!("pid={}", std::process::id()));
    assert_eq!(lines[2], "name=orders-svc");
    assert_eq!(
        lines[3],
        format!("version=redisson-lock {}", env!("CARGO_PKG_VERSION"))
    );
    assert!(lines[4].starts_with("started_ms="), "{value}");
    assert!((1..=3_000).contains(&pttl), "{pttl}");
    // Refreshed every third of its TTL: once it has run down a little,
    // the TTL goes up again.
    assert!(pttl > 0);
    eventually("ran down", || async { read().await.1 < 2_600 }).await;
    let low = read().await.1;
    eventually("refreshed", || async { read().await.1 > low + 200 }).await;
    client.shutdown().await;
    assert_eq!(read().await.0, None, "removed at shutdown");
}
