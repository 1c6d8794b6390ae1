//! TLS for real. Without a TLS feature, a `rediss` URL is refused with
//! `Error::Config` (never a plaintext connection). With one, against a
//! private `redis-server` that speaks only TLS, with certificates made at
//! test time: lock and unlock, a waiter woken by publish, an ACL user with a
//! password, each with every compiled-in backend (rustls, native-tls); a
//! wrong CA, the system's roots, and a plaintext server each fail with
//! `Error::Tls` within the timeout.
//!
//! `cargo test --features tls-rustls,tls-native-tls --test tls` (`.ci/run`
//! does); plain `cargo test` runs the first part.
mod common;

#[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
mod without_tls {
    use redisson_lock::{Client, Config, Error};

    /// Every TLS form of URL is refused at parse time, with a message that
    /// says what to enable and shows no password.
    #[tokio::test]
    async fn tls_urls_are_refused_never_downgraded() {
        for url in [
            "rediss://user:tls-secret@127.0.0.1:6380/1",
            "rediss-cluster://user:tls-secret@127.0.0.1:7000?node=127.0.0.1:7001",
            "rediss-sentinel://user:tls-secret@127.0.0.1:26379/0?sentinelServiceName=m",
        ] {
            let err = Config::from_url(url).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{url}: {err:?}");
            let shown = format!("{err} {err:?}");
            assert!(shown.contains("tls-rustls"), "{shown}");
            assert!(!shown.contains("tls-secret"), "{shown}");
            // Refused before any connection is tried: nobody listens there.
            let err = Client::connect(url).await.unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{url}: {err:?}");
        }
        // Plain URLs still parse.
        let config = Config::from_url("redis://127.0.0.1:6379").unwrap();
        assert!(!config.redis.uses_tls());
    }
}

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
mod with_tls {
    use std::time::{Duration, Instant};

    use crate::common::tls::{Backend, Certs, TlsServer, TlsServerExt};
    use crate::common::{unique, wait_numsub, Server};
    use fred::prelude::*;
    use redisson_lock::{Client, Config, Error};

    /// A `rediss` URL of every form gets a TLS configuration.
    #[test]
    fn tls_urls_get_a_tls_config() {
        for url in [
            "rediss://user:tls-secret@localhost:6380/1",
            "rediss-cluster://user:tls-secret@127.0.0.1:7000?node=127.0.0.1:7001",
            "rediss-sentinel://user:tls-secret@127.0.0.1:26379/0?sentinelServiceName=m",
        ] {
            let config = Config::from_url(url).unwrap();
            assert!(config.redis.uses_tls(), "{url}");
            let shown = format!("{config:?}");
            assert!(shown.contains("tls: true"), "{shown}");
            assert!(!shown.contains("tls-secret"), "{shown}");
        }
        assert!(!Config::from_url("redis://localhost:6379")
            .unwrap()
            .redis
            .uses_tls());
    }

    /// Lock, unlock and a waiter woken by the unlock's publish, over TLS
    /// only (the server has no plaintext port), with every backend.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lock_unlock_and_wake_by_publish_over_tls() {
        let certs = Certs::generate();
        let Some(server) = TlsServer::start(&certs).await else {
            return;
        };
        let raw = server.raw().await;
        for backend in Backend::all() {
            let config = || server.config(&server.url(None), backend);
            let holder = Client::connect_with(config()).await.unwrap();
            let waiter_client = Client::connect_with(config()).await.unwrap();
            let name = unique(&format!("tls-{backend:?}"));

            let guard = holder.lock(&name).unwrap().lock().await.unwrap();
            assert_eq!(
                raw.hget::<i64, _, _>(&name, guard.field()).await.unwrap(),
                1,
                "{backend:?}: the hold is in Redis"
            );
            let lock = waiter_client.lock(&name).unwrap();
            let waiter =
                tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(20)).await });
            // The waiter's client, and the holder's (its hold's watch).
            wait_numsub(&raw, &format!("redisson_lock__channel:{{{name}}}"), 2).await;
            let released = Instant::now();
            guard.unlock().await.unwrap();
            let next = tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("the waiter returns")
                .unwrap()
                .unwrap()
                .expect("the waiter gets the lock");
            // The lease is 30 s: only the publish wakes it this soon.
            let took = released.elapsed();
            assert!(
                took < Duration::from_secs(5),
                "{backend:?}: woken after {took:?}"
            );
            println!("{backend:?}: woken {took:?} after the unlock");
            next.unlock().await.unwrap();
            assert_eq!(raw.exists::<i64, _>(&name).await.unwrap(), 0);
            holder.shutdown().await;
            waiter_client.shutdown().await;
        }
    }

    /// An ACL user with a password over TLS; a wrong password is still
    /// `Error::Auth`, at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn acl_user_and_password_over_tls() {
        let certs = Certs::generate();
        let Some(server) = TlsServer::start(&certs).await else {
            return;
        };
        crate::common::acl_locker(&server.raw().await, "locker", "tls-locker-pw").await;
        for backend in Backend::all() {
            let client = Client::connect_with(
                server.config(&server.url(Some("locker:tls-locker-pw")), backend),
            )
            .await
            .unwrap();
            let name = format!("lk:{}", unique("tls-acl"));
            let guard = client.lock(&name).unwrap().lock().await.unwrap();
            guard.unlock().await.unwrap();
            client.shutdown().await;

            let started = Instant::now();
            let config = server
                .config(&server.url(Some("locker:wrong-tls-pw")), backend)
                .timeout(Duration::from_secs(2));
            let err = Client::connect_with(config).await.unwrap_err();
            assert!(matches!(err, Error::Auth(_)), "{backend:?}: {err:?}");
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{:?}",
                started.elapsed()
            );
            assert!(!format!("{err} {err:?}").contains("wrong-tls-pw"));
        }
    }

    /// How long a failing connect took and what it returned.
    async fn connect_failing(config: Config) -> (Duration, Error) {
        let started = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(10), Client::connect_with(config))
            .await
            .expect("connect returns within 10 s");
        match outcome {
            Ok(_) => panic!("connected where the handshake must fail"),
            Err(e) => (started.elapsed(), e),
        }
    }

    /// A CA that did not sign the server's certificate, or only the
    /// system's roots (what a plain `rediss` URL trusts): `Error::Tls`,
    /// not transient, within the timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_untrusted_certificate_is_a_typed_error_in_bounded_time() {
        let certs = Certs::generate();
        let Some(server) = TlsServer::start(&certs).await else {
            return;
        };
        let timeout = Duration::from_secs(2);
        let other_ca = certs.pem("other-ca.crt");
        for backend in Backend::all() {
            let mut config = Config::from_url(&server.url(None))
                .unwrap()
                .timeout(timeout);
            config.redis.tls = Some(backend.connector(&other_ca).into());
            let (took, err) = connect_failing(config).await;
            println!("{backend:?}, wrong CA: {took:?}: {err}");
            assert!(matches!(err, Error::Tls(_)), "{backend:?}: {err:?}");
            assert!(!err.is_transient());
            assert!(took < timeout, "{backend:?}: failed after {took:?}");
        }
        // The default connector of a rediss URL: the system's roots, which
        // do not include the test CA.
        let config = Config::from_url(&server.url(None))
            .unwrap()
            .timeout(timeout);
        let (took, err) = connect_failing(config).await;
        println!("system roots: {took:?}: {err}");
        assert!(matches!(err, Error::Tls(_)), "{err:?}");
        assert!(took < timeout, "failed after {took:?}");
    }

    /// A TLS client against a server without TLS fails, typed, in bounded
    /// time; it never falls back to plaintext.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_plaintext_server_is_refused() {
        let certs = Certs::generate();
        let server = Server::private();
        let timeout = Duration::from_secs(2);
        for backend in Backend::all() {
            let mut config = Config::from_url(&format!("rediss://127.0.0.1:{}", server.port))
                .unwrap()
                .timeout(timeout);
            config.redis.tls = Some(backend.connector(&certs.pem("ca.crt")).into());
            let (took, err) = connect_failing(config).await;
            println!("{backend:?}, plaintext server: {took:?}: {err}");
            assert!(
                matches!(err, Error::Tls(_) | Error::Connection(_)),
                "{backend:?}: {err:?}"
            );
            assert!(took < timeout + Duration::from_millis(500), "{took:?}");
        }
    }

    /// The blocking client over TLS.
    #[cfg(feature = "blocking")]
    #[test]
    fn blocking_client_over_tls() {
        let certs = Certs::generate();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let Some(server) = runtime.block_on(TlsServer::start(&certs)) else {
            return;
        };
        let config = server.config(&server.url(None), Backend::all()[0]);
        let client = redisson_lock::blocking::BlockingClient::connect_with(config).unwrap();
        let lock = client.lock(&unique("tls-blocking")).unwrap();
        let guard = lock.lock().unwrap();
        assert_eq!(lock.hold_count().unwrap(), 1);
        guard.unlock().unwrap();
        drop(client);
        drop(runtime);
    }
}
