//! Defect 2: a read unlock, an `extend` or a renewal never leaves another
//! hold of the hash believing in more time than Redis gives it.

use std::time::{Duration, Instant};

use redisson_lock::Owner;

use crate::common::Fixture;

/// The timeline, at a tenth of its scale: `r1` leased 1 s at t=0,
/// `r2 = r1.reenter()` at 0.5 s, `r2.unlock()` at 0.6 s. Afterwards `r1`'s
/// `expires_at()` is never later than the hash's real expiry, and a writer
/// on another client takes the lock only once `r1` is lost.
#[tokio::test]
async fn a_read_unlock_never_leaves_a_reader_believing_past_the_hash() {
    let fx = Fixture::new("read-unlock-timeline").await;
    let rw = fx.client.read_write_lock(&fx.name).unwrap();
    let r1 = rw
        .read()
        .with_owner(Owner::new(5))
        .lock_with_lease(Duration::from_secs(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r2 = r1.reenter().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    r2.unlock().await.unwrap();
    let pttl = fx.pttl(&fx.name).await;
    let server_expiry = Instant::now() + Duration::from_millis(u64::try_from(pttl).unwrap());
    let believed = r1.expires_at().expect("a leased hold");
    assert!(
        believed <= server_expiry + Duration::from_millis(5),
        "r1 believes in {:?} more than the hash has",
        believed.saturating_duration_since(server_expiry)
    );
    let writer = fx.client().await;
    let write = writer
        .read_write_lock(&fx.name)
        .unwrap()
        .write()
        .try_lock_for(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the writer gets the lock when the hash expires");
    assert!(r1.is_lost(), "a writer holds while r1 says it reads");
    write.unlock().await.unwrap();
}

/// `extend` on one reader never shortens the hash other readers live in.
#[tokio::test]
async fn extending_one_reader_never_shortens_another() {
    let fx = Fixture::new("read-extend").await;
    let rw = fx.client.read_write_lock(&fx.name).unwrap();
    let long = Duration::from_secs(10);
    let r1 = rw.read().lock_with_lease(long).await.unwrap();
    let mut r2 = rw.read().lock_with_lease(long).await.unwrap();
    r2.extend(Duration::from_secs(1)).await.unwrap();
    let pttl = fx.pttl(&fx.name).await;
    assert!(pttl > 9_000, "the hash was cut to {pttl} ms");
    assert!(!r1.is_lost());
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
}

/// A writer's renewal never shortens the hash below the read holds its
/// owner took with a longer lease.
#[tokio::test]
async fn the_writers_renewal_never_shortens_its_reads() {
    let fx = Fixture::with_watchdog("write-renewal-reads", Duration::from_secs(1)).await;
    let rw = fx.client.read_write_lock(&fx.name).unwrap();
    let owner = Owner::new(6);
    let write = rw.write().with_owner(owner).lock().await.unwrap();
    let reader = rw.read().with_owner(owner);
    let read = reader
        .lock_with_lease(Duration::from_secs(5))
        .await
        .unwrap();
    // Several renewals (every third of a second) of the write hold.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pttl = fx.pttl(&fx.name).await;
    assert!(pttl > 3_000, "a renewal cut the hash to {pttl} ms");
    write.unlock().await.unwrap();
    assert!(!read.is_lost());
    read.unlock().await.unwrap();
}
