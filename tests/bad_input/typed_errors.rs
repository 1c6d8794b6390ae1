//! Bad input and faults get typed errors, never a hang.

use std::time::{Duration, Instant};

use crate::common::{unique, Fixture, Server};
use fred::prelude::*;
use redisson_lock::{Client, Config, Error, Owner};

#[tokio::test]
async fn empty_name_is_refused() {
    let fx = Fixture::new("empty").await;
    assert!(matches!(fx.client.lock(""), Err(Error::InvalidName { .. })));
}

#[tokio::test]
async fn zero_lease_is_refused_and_zero_wait_tries_once() {
    let fx = Fixture::new("args").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    assert!(matches!(
        lock.lock_with_lease(Duration::ZERO).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        lock.try_lock_for_with_lease(Duration::from_secs(1), Duration::from_micros(10))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        !lock.is_locked().await.unwrap(),
        "a refused call sends nothing"
    );
    let guard = lock
        .try_lock_for(Duration::ZERO)
        .await
        .unwrap()
        .expect("free lock");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn bad_config_is_refused() {
    let bad = Config::default().lock_watchdog_batch_size(0);
    assert!(matches!(
        Client::connect_with(bad).await,
        Err(Error::Config(_))
    ));
    let bad = Config::default().timeout(Duration::ZERO);
    assert!(matches!(
        Client::connect_with(bad).await,
        Err(Error::Config(_))
    ));
    assert!(matches!(
        Config::from_url("http://nope"),
        Err(Error::Config(_))
    ));
}

#[tokio::test]
async fn unlock_by_a_non_owner_is_not_held() {
    let fx = Fixture::new("not-owner").await;
    let lock = fx.client.lock(&fx.name).unwrap();
    let guard = lock.lock().await.unwrap();
    // Someone else takes over the name: our hold is gone.
    assert!(lock.force_unlock().await.unwrap());
    let other = lock.with_owner(Owner::new(99)).lock().await.unwrap();
    match guard.unlock().await {
        Err(Error::NotHeld { name, owner }) => {
            assert_eq!(name, lock.name());
            assert!(owner.starts_with(&fx.client.id().to_string()));
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    assert!(
        lock.is_held_by(Owner::new(99)).await.unwrap(),
        "the real holder is untouched"
    );
    other.unlock().await.unwrap();
}

#[tokio::test]
async fn a_key_of_another_type_is_wrongtype() {
    let fx = Fixture::new("wrongtype").await;
    let (raw, name) = (&fx.raw, &fx.name);
    let _: () = raw
        .set(name, "not a hash", None, None, false)
        .await
        .unwrap();
    let lock = fx.client.lock(name).unwrap();
    match lock.try_lock().await {
        Err(Error::WrongType { key }) => assert_eq!(&key, name),
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert!(matches!(
        lock.hold_count(Owner::new(1)).await,
        Err(Error::WrongType { .. })
    ));
    let value: String = raw.get(name).await.unwrap();
    assert_eq!(value, "not a hash", "the foreign key is left alone");
}

#[tokio::test]
async fn unreachable_server_fails_within_the_timeout() {
    let mut server = Server::private();
    let url = server.url.clone();
    let config = || {
        Config::from_url(&url)
            .unwrap()
            .timeout(Duration::from_millis(300))
            .retry_attempts(1)
            .retry_delay(Duration::from_millis(50))
    };
    let client = Client::connect_with(config()).await.unwrap();
    let lock = client.lock(&unique("outage")).unwrap();
    server.kill();

    let started = Instant::now();
    let err = lock.is_locked().await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    let err = lock.lock().await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let err = Client::connect_with(config())
        .await
        .expect_err("no server to connect to");
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}
