//! A fenced lock's tokens across a server's data loss (docs/PROTOCOL.md §6.2,
//! *Data loss*): a restart without persistence, and a restart from a snapshot
//! older than the last token; and what an empty restart does to semaphores. The crate's next token is the server clock in
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

/// What a restart without persistence does to the semaphores
/// (docs/PROTOCOL.md §6.2, *What a restart without persistence does to
/// semaphores*): the count comes back missing while a holder from before
/// still holds its permit. An `RSemaphore` set again to 2 that then gets
/// back the pre-restart permit counts 3; left unset, that give-back creates
/// it with 1 and a later `try_set_permits` fails. A permit-expirable
/// semaphore set again keeps the set count: the pre-restart holder's
/// release finds its id unknown and writes nothing.
#[tokio::test]
async fn semaphores_across_an_empty_restart() {
    let mut server = Server::private();
    let client = server.client().await;

    // RSemaphore, set again after the loss.
    let sem = client.semaphore(&unique("sem-restart")).unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());
    let before = sem.acquire(1).await.unwrap();
    server.restart();
    assert_eq!(
        sem.available_permits().await.unwrap(),
        0,
        "the count is gone"
    );
    assert!(sem.try_set_permits(2).await.unwrap(), "set again");
    before.release().await.unwrap();
    assert_eq!(
        sem.available_permits().await.unwrap(),
        3,
        "the pre-restart permit is counted on top of the 2 set"
    );

    // RSemaphore left unset: the give-back creates it with 1.
    let sem = client.semaphore(&unique("sem-restart-unset")).unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());
    let before = sem.acquire(1).await.unwrap();
    server.restart();
    assert_eq!(
        sem.available_permits().await.unwrap(),
        0,
        "the count is gone"
    );
    before.release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert!(
        !sem.try_set_permits(2).await.unwrap(),
        "already set by the give-back"
    );

    // RPermitExpirableSemaphore set again: the old holder's release writes
    // nothing, the count stays as set.
    let pes = client
        .permit_expirable_semaphore(&unique("pes-restart"))
        .unwrap();
    assert!(pes.try_set_permits(2).await.unwrap());
    let before = pes.acquire(None).await.unwrap();
    server.restart();
    // (A read first: it is retried while the client reconnects; a write is
    // sent once.)
    assert_eq!(
        pes.available_permits().await.unwrap(),
        0,
        "the count is gone"
    );
    assert!(pes.try_set_permits(2).await.unwrap(), "set again");
    assert_eq!(pes.available_permits().await.unwrap(), 2);
    let released = before.release().await.unwrap();
    assert!(!released, "its id is unknown after the loss");
    assert_eq!(pes.available_permits().await.unwrap(), 2, "nothing written");
}
