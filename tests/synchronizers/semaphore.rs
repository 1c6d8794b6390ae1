//! `Semaphore` (Redisson's RSemaphore, docs/PROTOCOL.md §7.1): the exact Redis
//! state after every operation, waking by publish, Java-shaped commands
//! written here by hand, lost replies undone exactly, bad input, and
//! permits dropped late. The limit under two clients and 10 000 random
//! steps, dropped waiters and outages: `alike.rs`, with the other semaphore.
use crate::alike;
use crate::common;
use crate::semaphore_channel as channel;

use std::time::{Duration, Instant};

use crate::common::fault::{
    client_behind_proxy, client_through, quick_timeouts, reset_stalled, Proxy,
};
use crate::common::{assert_transient, eventually, invalid, wait_numsub, Fixture};
use fred::prelude::*;
use redisson_lock::{Error, Semaphore};

/// Redisson's tryAcquire(n) (§7.1), as a Java client runs it.
const JAVA_TRY_ACQUIRE: &str = "
local v = redis.call('get', KEYS[1])
if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1]); return 1
end
return 0";

/// Redisson's release(n) (§7.1): INCRBY, publish the new count.
const JAVA_RELEASE: &str = "
local v = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], v)";

/// Waits until no permit latch of the fixture's semaphore is left.
async fn until_no_latch(fx: &Fixture, what: &str) {
    fx.until_no_keys(what, &latch_pattern(&fx.name)).await;
}

pub(crate) fn latch_pattern(name: &str) -> String {
    format!("redisson_sc_latch:{{{name}}}:*")
}

async fn get(fx: &Fixture, key: &str) -> Option<String> {
    fx.raw.get(key).await.unwrap()
}

async fn java(fx: &Fixture, script: &str, keys: Vec<String>, args: Vec<String>) -> Value {
    fx.raw.eval(script, keys, args).await.unwrap()
}

/// Java's `release(n)` on the semaphore and channel `keys`, publishing.
async fn java_release(fx: &Fixture, keys: &[String], n: u32) -> Value {
    let args = vec![n.to_string(), "PUBLISH".into()];
    java(fx, JAVA_RELEASE, keys.to_vec(), args).await
}

#[tokio::test]
async fn every_operation_leaves_the_spec_state() {
    let fx = Fixture::new("sem-state").await;
    let name = &fx.name;
    let sem = fx.client.semaphore(name).unwrap();
    assert_eq!(sem.channel(), channel(name));
    let mut listener = fx.listen(&channel(name)).await;

    assert_eq!(sem.available_permits().await.unwrap(), 0, "absent: 0");
    assert!(sem.try_set_permits(5).await.unwrap());
    assert_eq!(get(&fx, name).await.as_deref(), Some("5"));
    assert_eq!(fx.pttl(name).await, -1, "no TTL");
    assert!(!sem.try_set_permits(7).await.unwrap(), "already set");
    assert_eq!(get(&fx, name).await.as_deref(), Some("5"));

    // An acquisition: DECRBY, plus its permit latch while held.
    let permit = sem.acquire(2).await.unwrap();
    assert_eq!(permit.permits(), 2);
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));
    let latches = fx.keys(&latch_pattern(name)).await;
    assert_eq!(latches.len(), 1, "{latches:?}");
    assert_eq!(get(&fx, &latches[0]).await.as_deref(), Some("1"));
    let ttl = fx.pttl(&latches[0]).await;
    assert!(ttl > 0 && ttl <= 32_000, "latch TTL {ttl}");
    let id = latches[0].rsplit(':').next().unwrap();
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));

    // Release: INCRBY, the new count published, the latch deleted after.
    permit.release().await.unwrap();
    assert_eq!(get(&fx, name).await.as_deref(), Some("5"));
    until_no_latch(&fx, "the permit latch deleted").await;

    assert!(sem.try_acquire(6).await.unwrap().is_none());
    assert!(
        fx.keys(&latch_pattern(name)).await.is_empty(),
        "no latch on a miss"
    );
    sem.release(2).await.unwrap(); // no upper bound
    assert_eq!(get(&fx, name).await.as_deref(), Some("7"));
    sem.add_permits(-3).await.unwrap();
    assert_eq!(get(&fx, name).await.as_deref(), Some("4"));
    assert_eq!(sem.available_permits().await.unwrap(), 4);

    // A dropped permit is given back in the background.
    drop(sem.acquire(3).await.unwrap());
    eventually("the dropped permit given back", || async {
        get(&fx, name).await.as_deref() == Some("4")
    })
    .await;
    // A forgotten one stays taken; its latch goes.
    sem.acquire(1).await.unwrap().forget();
    assert_eq!(get(&fx, name).await.as_deref(), Some("3"));
    until_no_latch(&fx, "the forgotten permit's latch deleted").await;
    // Zero permits: nothing sent.
    assert_eq!(sem.acquire(0).await.unwrap().permits(), 0);
    sem.release(0).await.unwrap();

    assert_eq!(sem.drain_permits().await.unwrap(), 3);
    assert_eq!(get(&fx, name).await.as_deref(), Some("0"));
    assert_eq!(sem.drain_permits().await.unwrap(), 0);

    assert_eq!(
        listener.drain().await,
        ["5", "5", "7", "4", "4"],
        "trySetPermits 5, release -> 5, release 2 -> 7, addPermits -3 -> 4, \
         the dropped permit's release -> 4; acquisitions, the forgotten \
         permit and drains publish nothing"
    );

    // trySetPermits with a TTL; addPermits and drain remove it (SET).
    let ttl_name = format!("{name}-ttl");
    let with_ttl = fx.client.semaphore(&ttl_name).unwrap();
    assert!(with_ttl
        .try_set_permits_with_ttl(3, Duration::from_secs(10))
        .await
        .unwrap());
    let pttl = fx.pttl(&ttl_name).await;
    assert!((9_000..=10_000).contains(&pttl), "{pttl}");
    with_ttl.add_permits(1).await.unwrap();
    assert_eq!(get(&fx, &ttl_name).await.as_deref(), Some("4"));
    assert_eq!(fx.pttl(&ttl_name).await, -1, "SET removes the TTL");

    // releaseIfExists creates nothing.
    let absent = format!("{name}-absent");
    let gone = fx.client.semaphore(&absent).unwrap();
    assert!(!gone.release_if_exists(2).await.unwrap());
    assert!(!fx.exists(&absent).await);
    assert!(with_ttl.release_if_exists(2).await.unwrap());
    assert_eq!(get(&fx, &ttl_name).await.as_deref(), Some("6"));
    // addPermits on an absent semaphore starts from 0.
    gone.add_permits(2).await.unwrap();
    assert_eq!(get(&fx, &absent).await.as_deref(), Some("2"));
}

#[tokio::test]
async fn a_waiter_is_woken_by_publish_long_before_any_timeout() {
    let fx = Fixture::new("sem-wake").await;
    let other = fx.client().await;
    let sem: Semaphore = alike::set_up(&fx, &fx.client, 0).await;
    let waiter = tokio::spawn({
        let sem = other.semaphore(&fx.name).unwrap();
        async move {
            let permit = sem
                .try_acquire_permits_for(2, Duration::from_secs(20))
                .await
                .unwrap()
                .expect("acquired");
            (Instant::now(), permit)
        }
    });
    wait_numsub(&fx.raw, &channel(&fx.name), 1).await;
    sem.release(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "one permit is not enough for two");
    let released = Instant::now();
    sem.release(1).await.unwrap();
    let (at, permit) = waiter.await.unwrap();
    assert!(
        at - released < Duration::from_secs(2),
        "woken after {:?}",
        at - released
    );
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    permit.release().await.unwrap();
    wait_numsub(&fx.raw, &channel(&fx.name), 0).await;
    assert_eq!(sem.available_permits().await.unwrap(), 2);
}

/// Java's scripts, written here from the spec, see and drive our side: a
/// Java acquisition is seen by ours, a Java release (publishing the new
/// count) wakes that many of our waiters, ours wakes a Java listener with
/// the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_shaped_commands_observe_and_drive_ours() {
    let fx = Fixture::new("sem-java").await;
    let name = fx.name.clone();
    let keys = vec![name.clone(), channel(&name)];
    let sem = fx.client.semaphore(&name).unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());

    // Java takes both; ours sees none left.
    let reply = java(&fx, JAVA_TRY_ACQUIRE, vec![name.clone()], vec!["2".into()]).await;
    assert_eq!(reply.as_i64(), Some(1));
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert!(sem.try_acquire(1).await.unwrap().is_none());

    // Three of our waiters; Java's release of 2 publishes "2": two wake and
    // take a permit each, the third keeps waiting.
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let sem = sem.clone();
        waiters.push(tokio::spawn(async move {
            sem.try_acquire_permits_for(1, Duration::from_secs(20))
                .await
                .unwrap()
        }));
    }
    wait_numsub(&fx.raw, &channel(&name), 1).await;
    let released = Instant::now();
    java_release(&fx, &keys, 2).await;
    eventually("two waiters woken", || async {
        waiters.iter().filter(|w| w.is_finished()).count() == 2
    })
    .await;
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "two woken at once"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut got = Vec::new();
    let (mut done, mut pending) = (Vec::new(), Vec::new());
    for w in waiters {
        if w.is_finished() {
            done.push(w.await.unwrap().expect("acquired"));
        } else {
            pending.push(w);
        }
    }
    assert_eq!(done.len(), 2);
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    got.extend(done);

    // Ours releases one: the third waiter wakes; a Java listener hears the count.
    let mut listener = fx.listen(&channel(&name)).await;
    got.pop().unwrap().release().await.unwrap();
    let third = pending
        .pop()
        .unwrap()
        .await
        .unwrap()
        .expect("the third acquires");
    let heard = listener.next().await;
    assert_eq!(heard.value.as_string().as_deref(), Some("1"));
    // Java releases a permit ours took (permits are not owned): counts add up.
    third.forget();
    java_release(&fx, &keys, 1).await;
    got.pop().unwrap().release().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    wait_numsub(&fx.raw, &channel(&name), 1).await; // only the listener
}

/// An acquisition whose reply is lost (its connection stalls towards the
/// client) took a permit on the server: it is undone exactly once, through
/// its permit latch, and the count ends exact.
#[tokio::test]
async fn a_lost_acquire_reply_is_undone_exactly() {
    let fx = Fixture::new("sem-lost").await;
    let (proxy, client) = client_behind_proxy(&fx, quick_timeouts).await;
    let sem: Semaphore = alike::set_up(&fx, &client, 2).await;
    // Load the scripts (EVALSHA would otherwise answer NOSCRIPT, stalled).
    sem.acquire(1).await.unwrap().release().await.unwrap();
    proxy.stall_to_client();
    let outcome = sem.try_acquire(1).await;
    assert_transient(&outcome);
    // It ran on the server (its latch says it took a permit), and its undo
    // ran right behind it (the latch says given back; only the replies are
    // held, so the client has not deleted the latch yet).
    let ours = fx.client.semaphore(&fx.name).unwrap();
    eventually("the lost acquisition undone", || async {
        let latches = fx.keys(&latch_pattern(&fx.name)).await;
        latches.len() == 1
            && get(&fx, &latches[0]).await.as_deref() == Some("0")
            && ours.available_permits().await.unwrap() == 2
    })
    .await;
    proxy.resume();
    until_no_latch(&fx, "no latch left").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ours.available_permits().await.unwrap(), 2, "undone once");
    let permit = sem.acquire(2).await.unwrap();
    assert_eq!(ours.available_permits().await.unwrap(), 0);
    permit.release().await.unwrap();
    assert_eq!(ours.available_permits().await.unwrap(), 2);
}

/// A dropped permit whose release ran but whose reply was lost, after which
/// the client stays cut off until that release's permit latch ("given back")
/// has expired: the retry cannot tell any more whether the permits came
/// back, so it sends the undo form, which gives back only what the latch
/// still says is taken. The permits are not given back twice.
#[tokio::test]
async fn a_release_retried_after_its_latch_expired_never_gives_back_twice() {
    let fx = Fixture::new("sem-late-retry").await;
    let proxy = Proxy::start(fx.server.port).await;
    // Retry budget 300 ms: permit latches live 600 ms.
    let client = client_through(&proxy, |c| {
        c.timeout(Duration::from_millis(200))
            .retry_delay(Duration::from_millis(100))
            .retry_attempts(1)
    })
    .await;
    let sem = client.semaphore(&fx.name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    // Load the scripts (EVALSHA would otherwise answer NOSCRIPT, stalled).
    sem.acquire(1).await.unwrap().release().await.unwrap();
    let permit = sem.acquire(1).await.unwrap();
    proxy.stall_to_client();
    drop(permit);
    eventually("the release ran", || async {
        get(&fx, &fx.name).await.as_deref() == Some("1")
    })
    .await;
    proxy.stall_to_server();
    until_no_latch(&fx, "its latch expired").await;
    assert_eq!(client.pending_releases(), 1, "unanswered, still trying");
    reset_stalled(&proxy).await;
    eventually("the retry landed", || async {
        client.pending_releases() == 0
    })
    .await;
    assert_eq!(get(&fx, &fx.name).await.as_deref(), Some("1"), "once");
}

#[tokio::test]
async fn bad_input_gets_typed_errors_and_writes_nothing() {
    let fx = Fixture::new("sem-bad").await;
    let (client, raw, name) = (&fx.client, &fx.raw, &fx.name);
    let sem = common::named(|n| client.semaphore(n), name);
    let too_many = i32::MAX as u32 + 1;
    assert!(invalid(&sem.acquire(too_many).await));
    assert!(invalid(
        &sem.try_acquire_permits_for(u32::MAX, Duration::from_secs(1))
            .await
    ));
    assert!(invalid(&sem.release(too_many).await));
    assert!(invalid(&sem.try_set_permits(too_many).await));
    for ttl in [Duration::ZERO, Duration::from_micros(999), Duration::MAX] {
        assert!(invalid(&sem.try_set_permits_with_ttl(1, ttl).await));
    }
    assert!(!fx.exists(name).await, "nothing written");
    // The extremes of addPermits are valid.
    sem.add_permits(i32::MIN).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), i64::from(i32::MIN));
    sem.add_permits(i32::MAX).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), -1);
    let _: i64 = raw.del(name).await.unwrap();

    // A key of another type, or a string that is not a count.
    let _: () = raw.hset(name, ("f", "1")).await.unwrap();
    let wrong =
        |r: &redisson_lock::Result<()>| matches!(r, Err(Error::WrongType { key }) if key == name);
    assert!(wrong(&sem.acquire(1).await.map(drop)));
    assert!(wrong(&sem.try_acquire(1).await.map(drop)));
    assert!(wrong(&sem.release(1).await));
    assert!(wrong(&sem.add_permits(1).await));
    assert!(wrong(&sem.available_permits().await.map(drop)));
    assert!(wrong(&sem.drain_permits().await.map(drop)));
    assert!(wrong(&sem.try_set_permits(1).await.map(drop)));
    assert!(wrong(&sem.release_if_exists(1).await.map(drop)));
    let _: i64 = raw.del(name).await.unwrap();
    let _: () = raw.set(name, "many", None, None, false).await.unwrap();
    assert!(wrong(&sem.acquire(1).await.map(drop)));
    assert!(wrong(&sem.release(1).await));
    assert!(wrong(&sem.available_permits().await.map(drop)));
    assert_eq!(get(&fx, name).await.as_deref(), Some("many"), "untouched");
    assert!(fx.keys(&latch_pattern(name)).await.is_empty());
}

/// A permit dropped after its client shut down, or after its runtime is
/// gone, does not panic (its permits stay taken: nothing can send).
#[test]
fn permits_dropped_after_the_client_is_gone_do_not_panic() {
    let server = common::Server::start();
    let name = common::unique("sem-late");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (client, sem, orphan) = runtime.block_on(async {
        let client = server.client().await;
        let sem = client.semaphore(&name).unwrap();
        assert!(sem.try_set_permits(3).await.unwrap());
        let late = sem.acquire(1).await.unwrap();
        let orphan = sem.acquire(1).await.unwrap();
        client.shutdown().await;
        drop(late);
        let sem = client.semaphore(&name).unwrap();
        assert!(matches!(sem.acquire(1).await, Err(Error::Closed)));
        (client, sem, orphan)
    });
    drop(runtime);
    drop(orphan); // its runtime is gone
    drop(sem);
    drop(client);
}

/// The synchronizers as Redis objects, with Redisson's effect on Redis
/// (docs/PROTOCOL.md §7.5): `exists`, `expire` (`PEXPIRE` on the count,
/// and on `{N}:timeout` for the permit-expirable semaphore),
/// `remain_time_to_live` (`PTTL N`), `clear_expire` (`PERSIST`), `delete`
/// (`DEL`, both keys for the permit-expirable semaphore; nothing published,
/// while the latch publishes `1`), and bad TTLs refused before anything is
/// written.
#[tokio::test]
async fn synchronizers_exist_expire_and_delete_as_redisson_objects() {
    use redisson_lock::{LatchOpened, Ttl};
    let fx = Fixture::new("sem-object").await;
    let sem = fx.client.semaphore(&format!("{}-sem", fx.name)).unwrap();
    let n = sem.name().to_string();

    assert!(!sem.exists().await.unwrap());
    assert_eq!(sem.remain_time_to_live().await.unwrap(), Ttl::NotLocked);
    assert!(!sem.expire(Duration::from_secs(60)).await.unwrap());
    assert!(!sem.clear_expire().await.unwrap());
    assert!(!sem.delete().await.unwrap());
    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(sem.exists().await.unwrap());
    assert_eq!(sem.remain_time_to_live().await.unwrap(), Ttl::NoExpiry);
    for bad in [Duration::ZERO, Duration::from_micros(999), Duration::MAX] {
        assert!(invalid(&sem.expire(bad).await));
    }
    assert_eq!(fx.pttl(&n).await, -1, "a refused expire wrote nothing");
    assert!(sem.expire(Duration::from_secs(60)).await.unwrap());
    let pttl = fx.pttl(&n).await;
    assert!((59_000..=60_000).contains(&pttl), "{pttl}");
    match sem.remain_time_to_live().await.unwrap() {
        Ttl::Expires(d) => assert!(d <= Duration::from_secs(60) && d > Duration::from_secs(59)),
        other => panic!("{other:?}"),
    }
    assert!(sem.clear_expire().await.unwrap());
    assert_eq!(fx.pttl(&n).await, -1);
    let mut heard = fx.listen(&channel(&n)).await;
    assert!(sem.delete().await.unwrap());
    assert!(!fx.exists(&n).await);
    assert!(!sem.exists().await.unwrap());
    let _: i64 = fx.raw.publish(channel(&n), "marker").await.unwrap();
    assert_eq!(
        heard.drain().await,
        vec!["marker".to_string()],
        "delete published nothing"
    );

    // Permit-expirable: both keys.
    let pes = fx
        .client
        .permit_expirable_semaphore(&format!("{}-pes", fx.name))
        .unwrap();
    let (n, timeouts) = (pes.name().to_string(), pes.timeouts_key().to_string());
    assert!(pes.try_set_permits(2).await.unwrap());
    let permit = pes.acquire(None).await.unwrap();
    permit.forget();
    assert!(fx.exists(&timeouts).await);
    assert!(pes.expire(Duration::from_secs(60)).await.unwrap());
    for key in [&n, &timeouts] {
        let pttl = fx.pttl(key).await;
        assert!((59_000..=60_000).contains(&pttl), "{key}: {pttl}");
    }
    assert!(matches!(
        pes.remain_time_to_live().await.unwrap(),
        Ttl::Expires(_)
    ));
    assert!(pes.clear_expire().await.unwrap());
    assert_eq!((fx.pttl(&n).await, fx.pttl(&timeouts).await), (-1, -1));
    // Only the timeouts set has an expiry: still `true` (any key's).
    let _: bool = fx.raw.pexpire(&timeouts, 60_000, None).await.unwrap();
    assert!(pes.clear_expire().await.unwrap());
    assert!(!pes.clear_expire().await.unwrap());
    assert!(pes.delete().await.unwrap());
    assert!(!fx.exists(&n).await && !fx.exists(&timeouts).await);
    assert!(!pes.exists().await.unwrap());
    assert!(!pes.delete().await.unwrap());
    // The timeouts set alone counts as existing for delete (Redisson's DEL
    // of both keys), not for exists (EXISTS N).
    let _: i64 = fx
        .raw
        .zadd(&timeouts, None, None, false, false, (1.0, "x"))
        .await
        .unwrap();
    assert!(!pes.exists().await.unwrap());
    assert!(pes.delete().await.unwrap());

    // The latch: exists; delete publishes 1 and opens our awaiters.
    let latch = fx
        .client
        .count_down_latch(&format!("{}-latch", fx.name))
        .unwrap();
    assert!(!latch.exists().await.unwrap());
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(latch.exists().await.unwrap());
    let awaiting = tokio::spawn({
        let latch = latch.clone();
        async move { latch.await_for(Duration::from_secs(20)).await.unwrap() }
    });
    wait_numsub(&fx.raw, latch.channel(), 1).await;
    assert!(latch.delete().await.unwrap());
    assert_eq!(awaiting.await.unwrap(), Some(LatchOpened::Deleted));
    assert!(!latch.exists().await.unwrap());
}
