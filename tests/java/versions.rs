//! docs/PROTOCOL.md §11: per-version statements observable from outside.

use std::time::Duration;

use crate::common::java::{self, Peer, Status, Topology};
use crate::common::Fixture;
use crate::scenarios::{check_ttl, expected_hash, owner, pttl_rises, Scene, LEASE_MS};
use fred::prelude::*;

/// Statements of docs/PROTOCOL.md §11 that one can observe from outside.
pub async fn versions_11(version: &str) {
    let Some(mut s) = Scene::start(version, "protocol-11").await else {
        return;
    };
    let v = version.to_string();
    let at_least = |major: u32, minor: u32| {
        let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap());
        let (a, b) = (it.next().unwrap(), it.next().unwrap());
        (a, b) >= (major, minor)
    };

    // §11.1 first acquisition: one field, value 1 (HINCRBY, same state as HSET).
    let name = s.name("first");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock lock:{name}")).await;
    s.steps.eq(
        s.hash(&name).await,
        expected_hash("lock", &jfield, 1),
        "§11.1 first acquisition",
    );

    // §11.1 unlock latch: written by Java from 3.24 on, never before.
    let mut set = KeysSet::start(&s.fx).await;
    s.java.ok("t1", &format!("unlock lock:{name}")).await;
    let events: Vec<String> = set
        .drain()
        .await
        .into_iter()
        .filter(|k| k.starts_with("redisson_unlock_latch:"))
        .collect();
    s.note(format!(
        "unlock latch keys set by java's unlock: {events:?}"
    ));
    s.steps.eq(
        events.len() == 1,
        at_least(3, 24),
        format!(
            "§11.1: Java {version} writes an unlock latch (expected from 3.24); events {events:?}"
        ),
    );

    // §11.1 unlock of an absent key: nil (IllegalMonitorStateException), nothing published.
    let name = s.name("absent");
    let mut listener =
        s.fx.listen(&format!("redisson_lock__channel:{{{name}}}"))
            .await;
    s.java
        .err(
            "t1",
            &format!("unlock lock:{name}"),
            "IllegalMonitorStateException",
        )
        .await;
    s.steps.eq(
        listener.drain().await,
        Vec::<String>::new(),
        "§11.1: an unlock of an absent key publishes nothing",
    );

    // §11.1 lease 0: expires at once before 3.17.1, "no lease" (watchdog) from 3.17.1.
    let name = s.name("lease0");
    s.java.ok("t1", &format!("lock lock:{name} 0")).await;
    let ttl = s.pttl(&name).await;
    s.note(format!("PTTL after java lock(lease 0): {ttl}"));
    if version == "3.17.0" {
        s.steps.check(ttl == -2, format!("§11.1: Redisson 3.17.0 with lease 0 should leave no key (expires at once), PTTL {ttl}"));
    } else {
        check_ttl(
            &s.steps,
            "§11.1: lease 0 means the watchdog from 3.17.1",
            ttl,
            LEASE_MS,
        );
        s.java.ok("t1", &format!("unlock lock:{name}")).await;
    }

    // §11.3 read unlock of a hash without `mode`: success up to 3.43, nil
    // (IllegalMonitorStateException) from 3.44; the crate's RLock hash has no mode.
    let name = s.name("nomode");
    let g = s.fx.client.lock(&name).unwrap().lock().await.unwrap();
    let mut listener = s.fx.listen(&format!("redisson_rwlock:{{{name}}}")).await;
    set.drain().await;
    let reply = s.java.call("t1", &format!("unlock read:{name}")).await;
    let heard = listener.drain().await;
    let latches = set
        .drain()
        .await
        .into_iter()
        .filter(|k| k.starts_with("redisson_unlock_latch:"))
        .count();
    s.steps.eq(
        latches,
        usize::from(at_least(3, 24)),
        "§11.3/§5.3: unlock latches written by java's read unlock of a hash without mode",
    );
    s.note(format!(
        "java read unlock of a mode-less hash: {:?} {}; published {heard:?}",
        reply.status, reply.value
    ));
    if at_least(3, 44) {
        s.steps.check(
            reply.status == Status::Err
                && reply.exception().ends_with("IllegalMonitorStateException"),
            format!(
                "§11.3: from 3.44 a read unlock of a hash without mode is nil (IMSE), got {:?} {}",
                reply.status, reply.value
            ),
        );
    } else {
        s.steps.eq(
            reply.status,
            Status::Ok,
            "§11.3: up to 3.43 a read unlock of a hash without mode succeeds",
        );
    }
    s.steps.eq(
        heard,
        vec!["0".to_string()],
        "§5.3 step 2: a read unlock of a hash without mode publishes 0",
    );
    s.steps.eq(
        s.fx.exists(&name).await,
        true,
        "the rust RLock hash survives java's read unlock",
    );
    g.unlock().await.unwrap();

    // §11.3 read re-entry: PEXPIRE max(PTTL N, lease) since 3.11.1.
    let name = s.name("reread");
    s.java.ok("t1", &format!("lock read:{name} 20000")).await;
    s.java.ok("t1", &format!("lock read:{name} 3000")).await;
    check_ttl(
        &s.steps,
        "§11.3: a read re-entry with a shorter lease keeps the longer TTL",
        s.pttl(&name).await,
        20_000,
    );
    s.java.ok("t1", &format!("unlock read:{name}")).await;
    s.java.ok("t1", &format!("unlock read:{name}")).await;

    // §11.3 read renewal: up to 4.4 Java refreshes every reader's timeout
    // key, from 4.5 only its own. A rust reader with a 20 s lease next to a
    // java reader renewed every 500 ms (watchdog 1.5 s in a second JVM).
    let redisson = java::redisson(version).unwrap();
    let mut fast = Peer::start_as(
        "java#2",
        &redisson,
        &Topology::Single(s.fx.server.url.clone()),
        &["--watchdog", "1500"],
        &s.steps,
    )
    .await;
    let name = s.name("renew");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let rg = rw
        .read()
        .with_owner(owner(1))
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let rkey = format!(
        "{{{name}}}:{}:rwlock_timeout:1",
        rw.read().owner_field(owner(1))
    );
    let jfield = fast.owner_field("t1").await;
    fast.ok("t1", &format!("lock read:{name}")).await;
    let jkey = format!("{{{name}}}:{jfield}:rwlock_timeout:1");
    pttl_rises(
        &s.steps,
        &s.fx.raw,
        &jkey,
        "java#2 renews its reader timeout key",
    )
    .await;
    let rttl = s.pttl(&rkey).await;
    s.note(format!(
        "after java#2 renewed: rust reader's timeout key PTTL {rttl} ms"
    ));
    if at_least(4, 5) {
        s.steps.check(rttl > 15_000, format!("§11.3: from 4.5 Java renews only its own readers; the rust reader's key has PTTL {rttl}"));
    } else {
        s.steps.check(rttl <= 1_500, format!("§11.3: up to 4.4 Java renews every reader's key to its lease (1500); the rust reader's key has PTTL {rttl}"));
    }
    fast.ok("t1", &format!("unlock read:{name}")).await;
    rg.unlock().await.unwrap();

    // §11.4 / §3.4: the publish command on a single server is PUBLISH.
    s.steps.eq(
        s.java.publish.as_str(),
        "PUBLISH",
        "publish command on a single server",
    );
}

/// The keys `SET` on a server, from keyevent notifications (turned on for
/// the whole server: `notify-keyspace-events E$`).
pub struct KeysSet {
    pub client: fred::clients::Client,
    pub rx: tokio::sync::broadcast::Receiver<fred::types::KeyspaceEvent>,
}

impl KeysSet {
    pub async fn start(fx: &Fixture) -> KeysSet {
        crate::common::config_set(&fx.raw, "notify-keyspace-events", "E$").await;
        let client = fx.raw.clone_new();
        client.init().await.unwrap();
        // fred hands keyspace and keyevent messages to this receiver, not to
        // `message_rx`.
        let rx = client.keyspace_event_rx();
        client.subscribe("__keyevent@0__:set").await.unwrap();
        let _: Value = client.ping(None).await.unwrap();
        let mut keys = KeysSet { client, rx };
        let probe = format!("{}-probe", fx.name);
        let _: () = fx.raw.set(&probe, 1, None, None, false).await.unwrap();
        assert_eq!(
            keys.drain().await,
            vec![probe],
            "keyevent notifications work"
        );
        keys
    }

    /// Every key set since the last drain, in order.
    pub async fn drain(&mut self) -> Vec<String> {
        let _: Value = self.client.ping(None).await.unwrap();
        let mut out = Vec::new();
        while let Ok(e) = self.rx.try_recv() {
            out.push(e.key.as_str().unwrap_or_default().to_string());
        }
        out
    }
}
