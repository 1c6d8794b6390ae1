//! Bad input, for every lock kind: durations at every boundary, names of
//! every shape, keys of the wrong type and out-of-range settings. Each gets
//! a typed error (or works, where the input is valid), no call panics, and
//! Redis is left exactly as it was.

use std::time::Duration;

use crate::common::make::*;
use crate::common::{invalid, unique, Fixture, Server};
use crate::tests_of;
use fred::prelude::*;
use redisson_lock::{Client, Config, Error, Kind, MultiLock, MAX_DURATION};

/// Every key in the database (test databases are private or uniquely named).
async fn keys_like(raw: &fred::clients::Client, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = raw
        .custom(fred::cmd!("KEYS"), vec![format!("*{name}*")])
        .await
        .unwrap();
    keys.sort();
    keys
}

/// Leases below 1 ms or above `MAX_DURATION` are refused before anything is
/// written; the bounds themselves work and set the TTL they say. Waits of
/// any size are valid: zero tries once, `Duration::MAX` waits without limit.
async fn durations<K: Kind, B: Kind>(make: Make<K>, blocker: Make<B>) {
    let fx = Fixture::new("bounds").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let lock = make(client, name);

    let refused = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
        MAX_DURATION + Duration::from_millis(1),
        Duration::MAX,
    ];
    for lease in refused {
        assert!(
            invalid(&lock.lock_with_lease(lease).await),
            "lease {lease:?}"
        );
        for wait in [Duration::ZERO, Duration::from_millis(5), Duration::MAX] {
            assert!(
                invalid(&lock.try_lock_for_with_lease(wait, lease).await),
                "lease {lease:?} wait {wait:?}"
            );
        }
        assert!(keys_like(raw, name).await.is_empty(), "lease {lease:?}");
    }

    // The bounds are valid, and the TTL is what was asked for.
    let guard = lock.lock_with_lease(MAX_DURATION).await.unwrap();
    let pttl: i64 = raw.pttl(lock.name()).await.unwrap();
    let max_ms = i64::try_from(MAX_DURATION.as_millis()).unwrap();
    assert!(pttl > max_ms - 60_000 && pttl <= max_ms, "PTTL {pttl}");
    guard.unlock().await.unwrap();
    let guard = lock
        .try_lock_for_with_lease(Duration::MAX, Duration::from_millis(1))
        .await
        .unwrap()
        .expect("free: acquired at once");
    drop(guard);

    // A wait of Duration::MAX on a held lock waits (no panic, no error) and
    // gets the lock when it is released.
    let holder = blocker(client, name).lock().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_lock_for(Duration::MAX).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "waits without limit");
    holder.unlock().await.unwrap();
    let woken = crate::common::within(Duration::from_secs(5), "woken by the unlock", waiter).await;
    let guard = woken.unwrap().expect("acquired");
    guard.unlock().await.unwrap();
    crate::common::eventually("nothing left", || async {
        keys_like(raw, name)
            .await
            .iter()
            .all(|k| k.starts_with("redisson_lock_token"))
    })
    .await;
}

tests_of!(durations:
    durations_rlock(rlock, rlock)
    durations_fair(fair, fair)
    durations_spin(spin, spin)
    durations_fenced(fenced, fenced)
    durations_read(read, write)
    durations_write(write, write)
);

/// Names of every shape but the empty one are valid Redis keys: the lock
/// works under them and writes exactly its hash (the channel and other
/// keys follow Redisson's brace rule). The empty name is refused.
#[tokio::test]
async fn names_of_every_shape() {
    let fx = Fixture::new("shapes").await;
    let (client, raw) = (&fx.client, &fx.raw);
    for (kind, made) in [
        ("lock", client.lock("").map(drop)),
        ("fair_lock", client.fair_lock("").map(drop)),
        ("read_write_lock", client.read_write_lock("").map(drop)),
        ("spin_lock", client.spin_lock("").map(drop)),
        ("fenced_lock", client.fenced_lock("").map(drop)),
    ] {
        assert!(matches!(made, Err(Error::InvalidName { .. })), "{kind}");
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    let shapes = [
        format!("{{{id}"),
        format!("{id}}}"),
        format!("{{}}{id}"),
        format!("{{{id}}}:tail"),
        format!("with space {id}"),
        format!("new\nline\r{id}"),
        format!("nul\0byte{id}"),
        format!("ünïcødé-锁-{id}"),
        format!("{id}:{}", "x".repeat(10_000)),
        format!("*?[glob]{id}"),
    ];
    for name in &shapes {
        let lock = client.lock(name).unwrap();
        let guard = lock.lock().await.unwrap();
        let exists: i64 = raw.exists(name.as_str()).await.unwrap();
        assert_eq!(exists, 1, "hash under {name:?}");
        let count: i64 = raw.hget(name.as_str(), guard.field()).await.unwrap();
        assert_eq!(count, 1);
        guard.unlock().await.unwrap();
        let exists: i64 = raw.exists(name.as_str()).await.unwrap();
        assert_eq!(exists, 0);

        let fair = client.fair_lock(name).unwrap();
        fair.lock().await.unwrap().unlock().await.unwrap();
        let rw = client.read_write_lock(name).unwrap();
        rw.read().lock().await.unwrap().unlock().await.unwrap();
        rw.write().lock().await.unwrap().unlock().await.unwrap();
        let exists: i64 = raw.exists(name.as_str()).await.unwrap();
        assert_eq!(exists, 0, "{name:?} released by every kind");
    }
}

/// A key of the wrong type at the lock's name (or at a fair lock's queue,
/// or a fenced lock's token) is `WrongType` for acquire, queries and force
/// unlock, and is left untouched.
async fn wrong_type<K: Kind>(make: Make<K>, at: fn(&str) -> String, types: &[&str]) {
    let fx = Fixture::new("wrongtype").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let lock = make(client, name);
    let key = at(name);
    for (kind, setup) in [
        ("string", vec!["SET", "v"]),
        ("list", vec!["RPUSH", "a"]),
        ("set", vec!["SADD", "a"]),
        ("zset", vec!["ZADD", "1", "a"]),
        ("hash", vec!["HSET", "f", "v"]),
    ] {
        if !types.contains(&kind) {
            continue;
        }
        let mut args = vec![key.clone()];
        args.extend(setup[1..].iter().map(|s| s.to_string()));
        let _: Value = raw.custom(fred::cmd!(setup[0]), args).await.unwrap();
        let before = keys_like(raw, name).await;
        let dump: Value = raw
            .custom(fred::cmd!("DUMP"), vec![key.clone()])
            .await
            .unwrap();
        for outcome in [
            lock.try_lock().await.map(drop),
            lock.try_lock_for(Duration::from_millis(50)).await.map(drop),
            lock.lock_with_lease(Duration::from_secs(1)).await.map(drop),
        ] {
            // Queue and token keys of the wrong type are only touched by
            // the kinds that use them; an unused one is no error.
            if key == *name {
                assert!(
                    matches!(outcome, Err(Error::WrongType { .. })),
                    "{kind}: {outcome:?}"
                );
            } else {
                assert!(
                    matches!(outcome, Err(Error::WrongType { .. }) | Ok(())),
                    "{kind}: {outcome:?}"
                );
            }
        }
        if key == *name {
            assert!(matches!(
                lock.is_locked().await,
                Err(Error::WrongType { .. }) | Ok(true)
            ));
        }
        let after: Value = raw
            .custom(fred::cmd!("DUMP"), vec![key.clone()])
            .await
            .unwrap();
        assert_eq!(dump, after, "{kind} at {key} untouched");
        let ttl: i64 = raw.pttl(key.as_str()).await.unwrap();
        assert_eq!(ttl, -1, "{kind}: no TTL added");
        if key == *name {
            assert_eq!(
                before,
                keys_like(raw, name).await,
                "{kind}: nothing else written"
            );
        }
        let _: i64 = raw.del(key.as_str()).await.unwrap();
        let _: Value = raw
            .custom(fred::cmd!("DEL"), keys_like(raw, name).await)
            .await
            .unwrap_or(Value::Null);
    }
}

fn same(name: &str) -> String {
    name.to_owned()
}

/// Every type but the lock hash's own.
const NOT_HASH: &[&str] = &["string", "list", "set", "zset"];

tests_of!(wrong_type:
    wrong_type_rlock(rlock, same, NOT_HASH)
    wrong_type_spin(spin, same, NOT_HASH)
    wrong_type_read(read, same, NOT_HASH)
    wrong_type_write(write, same, NOT_HASH)
);

#[tokio::test]
async fn wrong_type_fair() {
    wrong_type(fair, same, NOT_HASH).await;
    let queue = |n: &str| format!("redisson_lock_queue:{{{n}}}");
    wrong_type(
        non_reentrant_fair,
        queue,
        &["string", "set", "zset", "hash"],
    )
    .await;
    let timeouts = |n: &str| format!("redisson_lock_timeout:{{{n}}}");
    wrong_type(fair, timeouts, &["string", "list", "set", "hash"]).await;
}
#[tokio::test]
async fn wrong_type_fenced() {
    wrong_type(fenced, same, NOT_HASH).await;
    // A token that is not a number counts as the wrong type too.
    let token = |n: &str| format!("redisson_lock_token:{{{n}}}");
    wrong_type(fenced, token, &["string", "list", "set", "zset", "hash"]).await;
}

/// Settings out of range are `Error::Config` before any connection is made.
#[tokio::test]
async fn settings_out_of_range_are_refused() {
    let server = Server::start();
    let base = || Config::from_url(&server.url).unwrap();
    let too_long = MAX_DURATION + Duration::from_millis(1);
    let refused = [
        base().lock_watchdog_timeout(Duration::from_millis(2)),
        base().lock_watchdog_timeout(too_long),
        base().lock_watchdog_timeout(Duration::MAX),
        base().timeout(Duration::ZERO),
        base().timeout(Duration::MAX),
        base().retry_delay(Duration::MAX),
        base().fair_lock_wait_timeout(Duration::ZERO),
        base().fair_lock_wait_timeout(Duration::MAX),
        base().lock_watchdog_batch_size(0),
        base()
            .timeout(MAX_DURATION / 2)
            .retry_delay(MAX_DURATION / 2)
            .retry_attempts(u32::MAX),
    ];
    for config in refused {
        let shown = format!("{config:?}");
        match Client::connect_with(config).await {
            Err(Error::Config(_)) => {}
            other => panic!("{shown}: {:?}", other.map(|_| ())),
        }
    }
    // The bounds themselves are accepted.
    let client = Client::connect_with(base().lock_watchdog_timeout(Duration::from_millis(3)))
        .await
        .unwrap();
    drop(client);
    Client::connect_with(base().lock_watchdog_timeout(MAX_DURATION))
        .await
        .unwrap();
}

/// A multi-lock with one lock twice on one client would wait for itself:
/// refused. The same name on two clients is a normal RedLock.
#[tokio::test]
async fn multi_lock_with_a_member_twice_is_refused() {
    let server = Server::start();
    let other = Server::private();
    let (a, b) = (server.client().await, other.client().await);
    let name = unique("multi");
    let lock = a.lock(&name).unwrap();
    for members in [
        vec![lock.clone().into_erased(), lock.clone().into_erased()],
        vec![
            a.read_write_lock(&name).unwrap().read().into_erased(),
            a.read_write_lock(&name).unwrap().write().into_erased(),
        ],
        vec![
            a.fair_lock(&name).unwrap().into_erased(),
            a.lock(&format!("{name}-other")).unwrap().into_erased(),
            lock.clone().into_erased(),
        ],
    ] {
        assert!(matches!(
            MultiLock::new(members.clone()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            MultiLock::red_lock(members),
            Err(Error::InvalidArgument(_))
        ));
    }
    let both = MultiLock::red_lock([a.lock(&name).unwrap(), b.lock(&name).unwrap()]).unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), both.lock())
        .await
        .expect("no self-wait")
        .unwrap();
    guard.unlock().await.unwrap();
    // Boundaries of a multi-lock's lease and wait.
    let multi = MultiLock::new([a.lock(&unique("m")).unwrap()]).unwrap();
    assert!(matches!(
        multi.lock_with_lease(Duration::MAX).await,
        Err(Error::InvalidArgument(_))
    ));
    let guard = multi
        .try_lock_for_with_lease(Duration::MAX, MAX_DURATION)
        .await
        .unwrap()
        .expect("free");
    guard.unlock().await.unwrap();
}
