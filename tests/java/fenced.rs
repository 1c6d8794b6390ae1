//! The fenced lock: tokens shared across sides.

use crate::common::java::Steps;
use crate::scenarios::lock_state::foreign_unlock;
use crate::scenarios::locks::{counter, wake_java_to_rust, wake_rust_to_java};
use crate::scenarios::{kind_supported, owner, Scene};

pub async fn fenced(version: &str) {
    let Some(mut s) = Scene::start(version, "fenced-interop").await else {
        return;
    };
    if !kind_supported(&mut s, "fenced").await {
        return;
    }
    let name = s.name("tokens");
    let lock = s.fx.client.fenced_lock(&name).unwrap().with_owner(owner(1));
    let mut last = 0i64;
    let mut next = |steps: &Steps, token: i64, who: &str| {
        steps.check(
            token > last,
            format!("fencing token from {who}: {token}, not above the last one {last}"),
        );
        last = token;
    };
    for round in 0..3 {
        let jt = s.java_int("t1", &format!("locktoken fenced:{name}")).await;
        next(&s.steps, jt, "java lockAndGetToken");
        // Java re-entry takes a token too (§6.2).
        let jt2 = s.java_int("t1", &format!("locktoken fenced:{name}")).await;
        next(&s.steps, jt2, "java re-entry");
        let fenced = s.fx.client.fenced_lock(&name).unwrap();
        let seen = fenced.token().await.unwrap();
        s.steps
            .eq(seen, Some(jt2), "rust token() reads java's last token");
        s.java.ok("t1", &format!("unlock fenced:{name}")).await;
        s.java.ok("t1", &format!("unlock fenced:{name}")).await;
        let g = lock.lock().await.unwrap();
        next(&s.steps, g.fencing_token(), "rust lock");
        let g2 = g.reenter().await.unwrap();
        next(&s.steps, g2.fencing_token(), "rust re-entry");
        let jt: String = s.java.ok("t2", &format!("token fenced:{name}")).await;
        s.steps.eq(
            jt,
            g2.fencing_token().to_string(),
            "java getToken reads rust's last token",
        );
        let op = format!("trylocktoken fenced:{name} 0 -1");
        let what = "java tryLockAndGetToken of a rust-held fenced lock";
        s.java_says("t2", &op, "null", what).await;
        g2.unlock().await.unwrap();
        g.unlock().await.unwrap();
        s.note(format!("round {round} done"));
    }
    // Above the server clock in microseconds, so that every token is the
    // counter's INCR on both sides (a counter below the clock jumps to it,
    // docs/PROTOCOL.md §6.2).
    let start: i64 = 1 << 52;
    let counter_name = s.name("counter");
    let _: () = fred::interfaces::KeysInterface::set(
        &s.fx.raw,
        format!("redisson_lock_token:{{{counter_name}}}"),
        start,
        None,
        None,
        false,
    )
    .await
    .unwrap();
    counter(&mut s, "fenced", 20).await;
    let after = s
        .java_int("t1", &format!("token fenced:{counter_name}"))
        .await;
    s.steps.eq(
        after,
        start + 80,
        "fenced counter: one token per acquisition on both sides (4 x 20)",
    );
    wake_java_to_rust(&mut s, "fenced").await;
    wake_rust_to_java(&mut s, "fenced").await;
    foreign_unlock(&mut s, "fenced").await;
}
