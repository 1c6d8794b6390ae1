//! The semaphore, permit-expirable semaphore and latch scripts.

use crate::bench::Bench;
use crate::{ints, now_ms, s};

pub fn sem_keys(name: &str) -> (String, String, String) {
    (
        name.to_string(),
        format!("redisson_sc:{{{name}}}"),
        format!(
            "redisson_sc_latch:{{{name}}}:{}",
            uuid::Uuid::new_v4().simple()
        ),
    )
}

#[tokio::test]
async fn semaphore_scripts() {
    let mut t = Bench::new("sem").await;
    let (n, ch, latch) = sem_keys(&t.name);
    t.cmd(&["SET", &n, "5"]).await;
    let watch = vec![n.clone(), latch.clone()];
    let acquire = case!(body!("args.lua", "count.lua", "semaphore_acquire.lua"); n, latch;
        Permits 2, Ms 32_000;
        ..watch.clone());
    assert_eq!(t.accepts(&acquire, &[]).await.as_i64(), Some(1));
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("3"));
    assert_eq!(t.get(&latch).await.as_string().as_deref(), Some("1"));

    let release = case!(body!("args.lua", "count.lua", "semaphore_release.lua"); n, ch, latch;
        Permits 2, Publish "PUBLISH", Ms 32_000, Flag "0";
        ..watch.clone());
    assert_eq!(t.accepts(&release, &[]).await.as_i64(), Some(5));
    assert_eq!(t.next_message().await, (ch.clone(), s("5")));
    assert!(
        t.eval(
            body!("args.lua", "count.lua", "semaphore_release.lua"),
            &release.keys,
            release.good()
        )
        .await
        .unwrap()
        .is_null(),
        "a replay"
    );
    assert_eq!(t.get(&latch).await.as_string().as_deref(), Some("0"));

    let release_if_exists = case!(
        body!("args.lua", "count.lua", "semaphore_release_if_exists.lua"); n, ch;
        Permits 1, Publish "PUBLISH";
        ..watch.clone());
    assert_eq!(t.accepts(&release_if_exists, &[]).await.as_i64(), Some(1));
    assert_eq!(t.next_message().await, (ch.clone(), s("6")));

    let add = case!(body!("args.lua", "count.lua", "semaphore_add.lua"); n, ch;
        Delta -2, Publish "PUBLISH", Flag "0";
        ..watch.clone());
    assert_eq!(t.accepts(&add, &[]).await.as_i64(), Some(4));
    assert_eq!(t.next_message().await, (ch.clone(), s("4")));
    for extreme in ["-2147483648", "2147483647"] {
        let args = vec![s(extreme), s("PUBLISH"), s("1")];
        t.eval(
            body!("args.lua", "count.lua", "semaphore_add.lua"),
            &add.keys,
            args,
        )
        .await
        .unwrap();
    }
    assert_eq!(t.next_message().await, (ch.clone(), s("2147483647")));
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("3"));

    // trySetPermits on an absent semaphore; the TTL is optional.
    let absent = format!("{n}-absent");
    let try_set = case!(body!("args.lua", "count.lua", "semaphore_try_set.lua"); absent, ch;
        Permits0 3, Publish "PUBLISH";
        absent);
    let bad_ttls: Vec<(Vec<String>, Vec<String>, &str)> = ["0", "abc", "3155760000001"]
        .iter()
        .map(|ttl| {
            (
                try_set.keys.clone(),
                vec![s(3), s("PUBLISH"), s(ttl)],
                "ARGV[3]",
            )
        })
        .collect();
    t.refuses_bad_args(&try_set, &bad_ttls).await;
    let with_ttl = vec![s(0), s("PUBLISH"), s(10_000)];
    assert_eq!(
        t.eval(
            body!("args.lua", "count.lua", "semaphore_try_set.lua"),
            &try_set.keys,
            with_ttl
        )
        .await
        .unwrap()
        .as_i64(),
        Some(1)
    );
    assert!((9_000..=10_000).contains(&t.pttl(&absent).await));
    assert_eq!(t.next_message().await, (ch.clone(), s("0")));

    // drainPermits has no ARGV to check.
    let reply = t
        .eval(
            body!("args.lua", "count.lua", "semaphore_drain.lua"),
            std::slice::from_ref(&n),
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(3));
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("0"));
    t.nothing_published().await;
}

#[tokio::test]
async fn permit_expirable_semaphore_scripts() {
    let (mut t, n) = Bench::named("pes").await;
    let z = format!("{{{n}}}:timeout");
    let ch = format!("redisson_sc:{{{n}}}");
    let now = now_ms();
    t.cmd(&["SET", &n, "2"]).await;
    t.cmd(&["ZADD", &z, &s(now + 60_000), "held-permit-0001"])
        .await;
    let watch = vec![n.clone(), z.clone()];
    let id = s("0123456789abcdef");
    let acquire = case!(pes_body!("pes_acquire.lua"); n, z, ch;
        Permits 1, Epoch now + 30_000, Epoch now, Epoch "922337203685477", Publish "PUBLISH",
        Id id.clone();
        ..watch.clone());
    let two_ids = {
        let mut args = acquire.good();
        args[0] = s(2);
        (acquire.keys.clone(), args, "ARGV[1]")
    };
    let reply = t.accepts(&acquire, &[two_ids]).await;
    assert_eq!(ints(reply), [Some(1), Some(0)]);
    assert_eq!(
        t.cmd(&["ZSCORE", &z, &id]).await.as_i64(),
        Some(now + 30_000)
    );

    // updateLeaseTime, and the watchdog permits' renewal: one script.
    let update = case!(pes_body!("pes_renew.lua"); n, z, ch;
        Epoch now + 40_000, Epoch now, Publish "PUBLISH", Id id.clone();
        ..watch.clone());
    assert_eq!(ints(t.accepts(&update, &[]).await), [Some(1)]);

    let lease_time = case!(pes_body!("pes_lease_time.lua"); n, z, ch;
        Id id.clone(), Epoch "922337203685477", Epoch now, Publish "PUBLISH";
        ..watch.clone());
    let reply = t.accepts(&lease_time, &[]).await;
    assert_eq!(reply.as_i64(), Some(40_000));

    let counts =
        case!(pes_body!("pes_counts.lua"); n, z, ch; Epoch now, Publish "PUBLISH"; ..watch.clone());
    let reply = t.accepts(&counts, &[]).await;
    assert_eq!(ints(reply), [Some(1), Some(2)]);

    let set_permits = case!(body!("args.lua", "count.lua", "pes_set_permits.lua"); n, ch, z;
        Permits0 4, Publish "PUBLISH";
        ..watch.clone());
    let reply = t.accepts(&set_permits, &[]).await;
    assert_eq!(reply.as_i64(), Some(2), "4 in all, 2 taken");
    assert_eq!(t.next_message().await, (ch.clone(), s("4")));

    let release_many = case!(pes_body!("pes_release_many.lua"); n, ch, z;
        Permits 2, Epoch now, Publish "PUBLISH", Id id.clone(), Id "held-permit-0001";
        ..watch.clone());
    t.refuses_bad_args(&release_many, &[]).await;
    let release = case!(pes_body!("pes_release.lua"); n, ch, z;
        Id id.clone(), Permits 1, Epoch now, Publish "PUBLISH";
        ..watch.clone());
    t.refuses_bad_args(&release, &[]).await;
    let reply = t
        .eval(
            pes_body!("pes_release_many.lua"),
            &release_many.keys,
            release_many.good(),
        )
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(2));
    assert_eq!(t.next_message().await, (ch.clone(), s("2")));
    let reply = t
        .eval(pes_body!("pes_release.lua"), &release.keys, release.good())
        .await
        .unwrap();
    assert_eq!(reply.as_i64(), Some(-1), "already released");
    assert_eq!(t.get(&n).await.as_string().as_deref(), Some("4"));
    t.nothing_published().await;
}

#[tokio::test]
async fn latch_scripts() {
    let (mut t, n) = Bench::named("latch").await;
    let ch = format!("redisson_countdownlatch__channel__{{{n}}}");
    let try_set = case!(body!("args.lua", "count.lua", "latch_try_set.lua"); n, ch;
        Flag "1", Positive 2, Publish "PUBLISH";
        n);
    assert_eq!(t.accepts(&try_set, &[]).await.as_i64(), Some(1));
    assert_eq!(t.next_message().await, (ch.clone(), s("1")));
    let count_down = case!(body!("args.lua", "count.lua", "latch_count_down.lua"); n, ch;
        Flag "0", Publish "PUBLISH";
        n);
    assert_eq!(t.accepts(&count_down, &[]).await.as_i64(), Some(1));
    let delete =
        case!(body!("args.lua", "latch_delete.lua"); n, ch; Flag "1", Publish "PUBLISH"; n);
    assert_eq!(t.accepts(&delete, &[]).await.as_i64(), Some(1));
    assert_eq!(t.next_message().await, (ch.clone(), s("1")));
    t.nothing_published().await;
}
