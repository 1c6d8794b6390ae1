//! The read-write lock across sides, the write → read downgrade included.

use std::time::Instant;

use crate::scenarios::lock_state::{foreign_unlock, state_java_holds, state_rust_holds};
use crate::scenarios::locks::{counter, wake_java_to_rust, wake_rust_to_java};
use crate::scenarios::{check_ttl, java_woken, owner, read_hash, Scene, LEASE_MS};

pub async fn read_write(version: &str) {
    let Some(mut s) = Scene::start(version, "rw-interop").await else {
        return;
    };
    counter(&mut s, "write", 20).await;
    wake_java_to_rust(&mut s, "write").await;
    wake_rust_to_java(&mut s, "write").await;
    state_java_holds(&mut s, "write").await;
    state_rust_holds(&mut s, "write").await;
    foreign_unlock(&mut s, "write").await;
    foreign_unlock(&mut s, "read").await;

    // Readers of both sides share the lock; a writer on one side waits for
    // the other side's reader and is woken by its read unlock.
    let name = s.name("share");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock read:{name}")).await;
    let rread = rw.read().with_owner(owner(1));
    let rfield = rread.owner_field(owner(1));
    let rg = rread.try_lock().await.unwrap();
    s.steps
        .check(rg.is_some(), "rust read lock beside a java read lock");
    let want = read_hash(&[&jfield, &rfield]);
    s.steps.eq(
        s.hash(&name).await,
        want,
        "read-write hash with a java and a rust reader",
    );
    for field in [&jfield, &rfield] {
        let key = format!("{{{name}}}:{field}:rwlock_timeout:1");
        check_ttl(
            &s.steps,
            &format!("reader timeout key {key}"),
            s.pttl(&key).await,
            LEASE_MS,
        );
    }
    rg.unwrap().unlock().await.unwrap();
    let writer = rw.write().with_owner(owner(2));
    let w = s.waiter(async move { writer.lock().await.unwrap() }, |_| {
        "write lock acquired".into()
    });
    s.subscribed(&format!("redisson_rwlock:{{{name}}}"), 1)
        .await;
    let released = s.java.call("t1", &format!("unlock read:{name}")).await;
    let what = "rust writer after java read unlock";
    let wg = w.woken(&s.steps, what, released.at).await;
    // Rust writer holds; a java reader waits and is woken by the write unlock ("1").
    // The Rust writer's client stays subscribed (its hold's watch): the Java
    // reader is known to wait by its own subscription beside it.
    s.subscribed(&format!("redisson_rwlock:{{{name}}}"), 1)
        .await;
    let (_, reading) = s.java_waits_beside("read", &name, 1).await;
    // Redisson's reader wakes on "1" only once parked on its latch, a moment
    // after its second try: a round trip through the JVM (thread t1, free)
    // gives t2 that moment before the unlock publishes.
    s.java.ok("t1", "ping").await;
    wg.unlock().await.unwrap();
    let what = "java reader after rust write unlock";
    java_woken(&s.steps, reading, what, Instant::now()).await;
    s.java.ok("t2", &format!("unlock read:{name}")).await;

    // Downgrade on the Java side: write, read, unlock write. Redisson
    // publishes nothing (Q5); the hash is left in read mode with java's read
    // hold, which a rust reader shares at once.
    let name = s.name("downgrade-java");
    let jfield = s.java.owner_field("t1").await;
    s.java.ok("t1", &format!("lock write:{name}")).await;
    s.java.ok("t1", &format!("lock read:{name}")).await;
    let channel = format!("redisson_rwlock:{{{name}}}");
    let what = "messages of java's write->read downgrade (none: Q5)";
    s.java_publishes_nothing(&channel, &format!("unlock write:{name}"), what)
        .await;
    let want = read_hash(&[&jfield]);
    s.steps
        .eq(s.hash(&name).await, want, "hash after java's downgrade");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let shared = rw.read().try_lock().await.unwrap();
    s.steps.check(
        shared.is_some(),
        "rust reader shares java's downgraded lock",
    );
    s.steps.check(
        rw.write().try_lock().await.unwrap().is_none(),
        "rust writer refused after java's downgrade",
    );
    shared.unwrap().unlock().await.unwrap();
    s.java.ok("t1", &format!("unlock read:{name}")).await;
    s.steps.eq(
        s.fx.exists(&name).await,
        false,
        "hash gone after the java reader left",
    );

    // Downgrade on the Rust side wakes a waiting java reader (§14 item 8).
    let name = s.name("downgrade-rust");
    let rw = s.fx.client.read_write_lock(&name).unwrap();
    let wg = rw.write().with_owner(owner(3)).lock().await.unwrap();
    let rfield = rw.read().owner_field(owner(3));
    // Parked, not only subscribed: the downgrade publishes "1" (see
    // `Scene::waits`).
    let (jfield, reading) = s.java_waits("read", &name).await;
    let rg = wg.downgrade().await.unwrap();
    let what = "java reader after rust's write->read downgrade";
    java_woken(&s.steps, reading, what, Instant::now()).await;
    let want = read_hash(&[&jfield, &rfield]);
    s.steps.eq(
        s.hash(&name).await,
        want,
        "hash after rust's downgrade and java's read",
    );
    s.steps.eq(
        s.java.ok("t1", &format!("trylock write:{name} 0 -1")).await,
        "false".into(),
        "java writer refused while rust and java read",
    );
    rg.unlock().await.unwrap();
    s.java.ok("t2", &format!("unlock read:{name}")).await;
}
