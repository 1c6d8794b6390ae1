//! A fenced lock's tokens across a server's data loss (docs/PROTOCOL.md §6.2,
//! *Data loss*): a restart without persistence, and a restart from a snapshot
//! older than the last token. The crate's next token is the server clock in
//! microseconds, above every token handed out before; Java's INCR continues
//! from there; a Java acquisition that comes first after the loss starts
//! again at 1 (what remains).
use crate::common::{unique, Server};

use fred::prelude::*;
use redisson_lock::FencedLock;

/// Lock and unlock once: the acquisition's token.
async fn take(lock: &FencedLock) -> i64 {
    let guard = lock.lock().await.unwrap();
    let token = guard.fencing_token();
    guard.unlock().await.unwrap();
    token
}

#[tokio::test]
async fn tokens_stay_above_across_an_empty_restart() {
    let mut server = Server::private();
    let client = server.client().await;
    let lock = client.fenced_lock(&unique("fenced-restart")).unwrap();
    let key = lock.token_key().to_owned();
    let mut last = 0;
    for _ in 0..3 {
        let token = take(&lock).await;
        assert!(token > last);
        last = token;
    }

    server.restart();
    let raw = server.raw().await;
    let exists: i64 = raw.exists(&key).await.unwrap();
    assert_eq!(exists, 0, "the restart lost the counter");
    let after = take(&lock).await;
    assert!(
        after > last,
        "first token after the restart {after}, not above {last}"
    );
    // Java's Redisson takes a token with a plain INCR (simulated here): it
    // continues the sequence the crate seeded, and ours stay above it.
    let java: i64 = raw.incr(&key).await.unwrap();
    assert_eq!(java, after + 1, "Java's INCR continues the seeded counter");
    let next = take(&lock).await;
    assert!(next > java, "{next} > {java}");

    // What remains: a Java fenced lock that takes first after the loss
    // INCRs the missing counter to 1, below every earlier token; the
    // crate's next acquisition is above all of them again.
    server.restart();
    let raw = server.raw().await;
    let java_first: i64 = raw.incr(&key).await.unwrap();
    assert_eq!(java_first, 1, "Java first after the loss: token 1");
    let ours = take(&lock).await;
    assert!(ours > next, "{ours} > {next}");
}

#[tokio::test]
async fn tokens_stay_above_a_snapshot_older_than_the_last_token() {
    let dir = std::env::temp_dir().join(unique("fenced-rdb"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut server =
        Server::private_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let client = server.client().await;
    let lock = client.fenced_lock(&unique("fenced-snapshot")).unwrap();
    let key = lock.token_key().to_owned();
    let raw = server.raw().await;

    let saved = take(&lock).await;
    let _: Value = raw
        .custom(fred::cmd!("SAVE"), Vec::<String>::new())
        .await
        .unwrap();
    let mut last = saved;
    for _ in 0..3 {
        let token = take(&lock).await;
        assert!(token > last);
        last = token;
    }
    // Killed (no save on the way down) and started again: it loads the
    // snapshot, whose counter is older than the last tokens.
    server.restart();
    let raw = server.raw().await;
    let loaded: Option<i64> = raw.get(&key).await.unwrap();
    assert_eq!(loaded, Some(saved), "the counter as the snapshot had it");
    let after = take(&lock).await;
    assert!(
        after > last,
        "first token after the restart {after}, not above {last} (INCR alone gives {})",
        saved + 1
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
