//! Secrets (the server's password, a sentinel's password) never appear in
//! `Debug` of `Config` or `Client`, in any `Error` (`Display` or `Debug`),
//! nor in `tracing` output, which is captured here at TRACE level with
//! fred's `log` records bridged in, while connecting with a wrong password,
//! with the right one, and while parsing bad URLs.
mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::{unique, Server};
use redisson_lock::{Client, Config, Error};

/// Everything every test of this file traced (one global subscriber).
fn captured() -> &'static Arc<Mutex<Vec<u8>>> {
    static BUFFER: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    BUFFER.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = buffer.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || Sink(sink.clone()))
            // Also installs the `log` bridge: fred logs through `log`.
            .try_init()
            .expect("the only subscriber of this test binary");
        buffer
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn traced() -> String {
    String::from_utf8_lossy(&captured().lock().unwrap()).into_owned()
}

/// `shown` (what was printed or traced) contains none of `secrets`.
#[track_caller]
fn assert_hidden(what: &str, shown: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !shown.contains(secret),
            "{what} shows the secret {secret:?}:\n{shown}"
        );
    }
}

/// A private server whose default user needs `admin-secret-pw`.
async fn server_with_password() -> Server {
    let server = Server::private();
    let raw = server.raw().await;
    common::config_set(&raw, "requirepass", "admin-secret-pw").await;
    server
}

#[test]
fn config_debug_hides_every_password() {
    captured();
    for (url, secrets) in [
        (
            "redis://user:plain-secret@127.0.0.1:6379/2",
            vec!["plain-secret"],
        ),
        (
            "redis://:p%40ss%2Bsecret@127.0.0.1:6379",
            vec!["p%40ss%2Bsecret", "p@ss+secret"],
        ),
        (
            "redis-cluster://u:cluster-secret@127.0.0.1:7000?node=127.0.0.1:7001",
            vec!["cluster-secret"],
        ),
        (
            "redis-sentinel://u:main-secret@127.0.0.1:26379/0?sentinelServiceName=m\
             &sentinelUsername=s&sentinelPassword=sentinel-secret",
            vec!["main-secret", "sentinel-secret"],
        ),
    ] {
        let config = Config::from_url(url).unwrap();
        let shown = format!("{config:?} {config:#?}");
        assert_hidden(url, &shown, &secrets);
        assert!(shown.contains("<redacted>"), "{shown}");
    }
    // A sentinel password set in fred's config by hand (fred's
    // `sentinel-auth` feature, which the tests enable; fred's own `Debug`
    // would show it).
    let mut config = Config::default();
    config.redis.server = fred::types::config::ServerConfig::Sentinel {
        hosts: vec![fred::types::config::Server::new("127.0.0.1", 26379)],
        service_name: "mymaster".into(),
        username: Some("sentinel-user".into()),
        password: Some("hand-set-sentinel-secret".into()),
    };
    config.redis.password = Some("hand-set-secret".into());
    assert!(format!("{:?}", config.redis).contains("hand-set-sentinel-secret"));
    let shown = format!("{config:?} {config:#?}");
    assert_hidden(
        "a hand-made sentinel config",
        &shown,
        &["hand-set-sentinel-secret", "hand-set-secret"],
    );
    assert!(
        shown.contains("mymaster") && shown.contains("127.0.0.1:26379"),
        "{shown}"
    );
}

#[test]
fn url_errors_never_repeat_a_secret() {
    captured();
    let secret = "url-secret-7";
    for url in [
        format!("redis://user:{secret}@127.0.0.1:notaport"),
        format!("redis://user:{secret}@127.0.0.1:6379/notadb"),
        format!("redis://user:{secret}@127.0.0.1:6379/1/2"),
        format!("redis://user:{secret}@127.0.0.1:6379/999"),
        format!("redis://user:{secret}@[bad"),
        format!("redis://user:{secret}@"),
        format!("http://user:{secret}@127.0.0.1:6379"),
        format!("user:{secret}@127.0.0.1:6379"),
        format!("redis-cluster://user:{secret}@127.0.0.1:7000?node=bad-node"),
        format!("redis-cluster://user:{secret}@127.0.0.1:7000?node=h:{secret}"),
        format!("redis-sentinel://user:{secret}@127.0.0.1:26379/0"),
        format!("redis-sentinel://127.0.0.1:26379/0?sentinelPassword={secret}&node=x"),
        format!("redis+unix://user:{secret}@/tmp/redis.sock"),
        format!("redis://user:{secret}%ZZ@127.0.0.1:6379/x"),
    ] {
        let err = Config::from_url(&url).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{url}: {err:?}");
        assert_hidden(&url, &format!("{err} {err:?} {err:#?}"), &[secret]);
        println!("{url} -> {err}");
    }
    assert_hidden("tracing output", &traced(), &[secret]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_with_a_wrong_password_shows_no_secret_anywhere() {
    captured();
    let server = server_with_password().await;
    let secrets = ["wrong-secret-pw", "admin-secret-pw"];

    // Wrong password: a typed error that names no password.
    let config = Config::from_url(&format!(
        "redis://default:wrong-secret-pw@127.0.0.1:{}",
        server.port
    ))
    .unwrap()
    .timeout(Duration::from_secs(2));
    let err = Client::connect_with(config).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert_hidden("the error", &format!("{err} {err:?} {err:#?}"), &secrets);
    // ... and says which server refused.
    let address = format!("127.0.0.1:{}", server.port);
    assert_eq!(err.server(), Some(address.as_str()), "{err}");
    assert!(err.to_string().contains(&address), "{err}");
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        assert_hidden(
            "the error's sources",
            &format!("{cause} {cause:?}"),
            &secrets,
        );
        source = cause.source();
    }

    // Right password: the client, its config and everything it traced
    // while locking hide it.
    let client = Client::connect_with(
        Config::from_url(&format!(
            "redis://default:admin-secret-pw@127.0.0.1:{}",
            server.port
        ))
        .unwrap(),
    )
    .await
    .unwrap();
    assert_hidden(
        "Client's Debug",
        &format!("{client:?} {client:#?}"),
        &secrets,
    );
    let name = unique("secrets");
    let guard = client.lock(&name).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
    client.shutdown().await;

    let traced = traced();
    assert_hidden("tracing output", &traced, &secrets);
    // The capture works: fred's connection logs came through.
    assert!(traced.contains("fred::protocol::connection"), "{traced}");
    println!(
        "{} bytes traced, e.g.:\n{}",
        traced.len(),
        &traced[..traced.len().min(2000)]
    );
}

/// A connection refused at an address given with credentials names the
/// address (`host:port`), never the user's password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_names_the_address_not_the_password() {
    captured();
    let port = common::free_port();
    let secret = "refused-secret-pw";
    let config = Config::from_url(&format!("redis://locker:{secret}@127.0.0.1:{port}")).unwrap();
    let err = Client::connect_with(config).await.unwrap_err();
    let shown = format!("{err} {err:?} {err:#?}");
    assert_hidden("the error", &shown, &[secret]);
    let address = format!("127.0.0.1:{port}");
    assert!(err.to_string().contains(&address), "{err}");
    assert_eq!(err.server(), Some(address.as_str()));
    assert_hidden("tracing output", &traced(), &[secret]);
}
