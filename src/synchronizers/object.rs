//! The synchronizers as Redis objects (Redisson's `RObject` and
//! `RExpirable` methods): whether they exist, deleting them, and their
//! expiry, with the same effect on Redis as Redisson's
//! (docs/PROTOCOL.md §7.5).
//!
//! | call | [`Semaphore`] | [`PermitExpirableSemaphore`] | [`CountDownLatch`] |
//! |---|---|---|---|
//! | `exists` | `EXISTS N` | `EXISTS N` | `EXISTS N` |
//! | `delete` | `DEL N` | `DEL N {N}:timeout` | script: `DEL N`, publish `1` if it existed |
//! | `expire` | `PEXPIRE N` | `PEXPIRE` on both keys | — (not `RExpirable` in Java) |
//! | `clear_expire` | `PERSIST N` | `PERSIST` on both keys | — |
//! | `remain_time_to_live` | `PTTL N` | `PTTL N` | — |
//!
//! Redisson runs the two-key `expire`/`clearExpire` of the permit-expirable
//! semaphore as one script; here they are two commands written together on
//! one connection (both keys share a hash slot), which leaves the same
//! state. Neither semaphore's `delete` publishes anything, as in Redisson:
//! waiters keep waiting for permits (a semaphore that no longer exists has
//! none), and a permit held meanwhile is given back into a fresh count.

use std::future::Future;
use std::time::Duration;

use fred::interfaces::KeysInterface;

use crate::base::error::Result;
use crate::engine::shared::Inner;
use crate::locks::lock::Ttl;
use crate::synchronizers::count_down_latch::CountDownLatch;
use crate::synchronizers::permit_semaphore::PermitExpirableSemaphore;
use crate::synchronizers::semaphore::Semaphore;

/// `EXISTS key`, retried.
async fn exists(inner: &Inner, key: &str) -> Result<bool> {
    Ok(read_int(inner, key, |c, key| async move { c.exists(key).await }).await? > 0)
}

/// `PTTL key`, retried.
async fn ttl(inner: &Inner, key: &str) -> Result<Ttl> {
    let ms = read_int(inner, key, |c, key| async move { c.pttl(key).await }).await?;
    Ok(Ttl::from_pttl(ms))
}

/// A read of one key answered by an integer, retried (it changes nothing).
async fn read_int<F, Fut>(inner: &Inner, key: &str, command: F) -> Result<i64>
where
    F: Fn(fred::clients::Client, String) -> Fut,
    Fut: Future<Output = std::result::Result<i64, fred::error::Error>>,
{
    inner
        .redis
        .key_command(key, |c| command(c, key.to_owned()))
        .await
}

/// `DEL keys…` (one slot), sent once: whether any existed.
async fn delete(inner: &Inner, keys: &[&str]) -> Result<bool> {
    let first = keys.first().copied().unwrap_or_default();
    let owned: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    let n: i64 = inner
        .redis
        .write_once(first, |c| async move { c.del(owned).await })
        .await?;
    Ok(n > 0)
}

/// `PEXPIRE key ms` on each key (one slot), written together: whether any
/// key's expiry was set (Redisson's answer). Idempotent, so retried.
async fn expire(inner: &Inner, keys: &[&str], ttl: Duration) -> Result<bool> {
    let ttl = crate::base::time::checked("ttl", ttl)?;
    let ms = crate::connection::script::millis(ttl);
    let first = keys.first().copied().unwrap_or_default();
    let owned: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    let set: Vec<bool> = inner
        .redis
        .key_command(first, |c| {
            let keys = owned.clone();
            async move {
                let pipeline = c.pipeline();
                for key in keys {
                    let _: () = pipeline.pexpire(key, ms, None).await?;
                }
                pipeline.all().await
            }
        })
        .await?;
    Ok(set.into_iter().any(|s| s))
}

/// `PERSIST key` on each key (one slot), written together and sent once (a
/// resend would answer `false`): whether any key lost its expiry.
async fn persist(inner: &Inner, keys: &[&str]) -> Result<bool> {
    let first = keys.first().copied().unwrap_or_default();
    let owned: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    let cleared: Vec<bool> = inner
        .redis
        .write_once(first, |c| async move {
            let pipeline = c.pipeline();
            for key in owned {
                let _: () = pipeline.persist(key).await?;
            }
            pipeline.all().await
        })
        .await?;
    Ok(cleared.into_iter().any(|c| c))
}

/// The object methods both semaphores share; `$keys` lists the keys that
/// `delete`, `expire` and `clear_expire` touch (Redisson's choice per kind).
macro_rules! expirable {
    ($type:ident, $java:literal, $keys:expr, $keys_doc:literal) => {
        impl $type {
            #[doc = concat!("Whether the ", $java, " exists (`EXISTS N`; Redisson's `isExists`).")]
            ///
            /// # Errors
            ///
            /// A transient error after `retry_attempts` retries;
            /// [`Error::Closed`](crate::Error::Closed) after shutdown.
            ///
            /// # Cancel safety
            ///
            /// It only reads: dropping it at any point leaves nothing behind.
            #[doc(alias = "isExists")]
            pub async fn exists(&self) -> Result<bool> {
                exists(self.inner(), self.name()).await
            }

            #[doc = concat!("Delete the ", $java, " (Redisson's `delete`: `DEL ", $keys_doc, "`); whether anything existed.")]
            ///
            /// Nothing is published, as in Redisson: waiters keep waiting
            /// (there are no permits), and permits held meanwhile are given
            /// back into a fresh count when released.
            ///
            /// # Errors
            ///
            /// A transient error at once (sent once: a resend of a delete
            /// that ran would answer `false`).
            ///
            /// # Cancel safety
            ///
            /// A dropped future may or may not have deleted it.
            #[doc(alias = "del")]
            pub async fn delete(&self) -> Result<bool> {
                let keys: Vec<&str> = $keys(self);
                delete(self.inner(), &keys).await
            }

            #[doc = concat!("Let the ", $java, " expire after `ttl` (Redisson's `expire(Duration)`: `PEXPIRE` on ", $keys_doc, "); whether an expiry was set (`false`: it does not exist).")]
            ///
            /// # Errors
            ///
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a `ttl` below 1 ms or above
            /// [`MAX_DURATION`](crate::MAX_DURATION), before anything is
            /// sent; a transient error after `retry_attempts` retries (a
            /// resend sets the same expiry again).
            ///
            /// # Cancel safety
            ///
            /// A dropped future may or may not have set the expiry.
            #[doc(alias = "pexpire")]
            pub async fn expire(&self, ttl: Duration) -> Result<bool> {
                let keys: Vec<&str> = $keys(self);
                expire(self.inner(), &keys, ttl).await
            }

            #[doc = concat!("Remove the ", $java, "'s expiry (Redisson's `clearExpire`: `PERSIST` on ", $keys_doc, "); whether an expiry was removed.")]
            ///
            /// # Errors
            ///
            /// A transient error at once (sent once: a resend would answer
            /// `false`).
            ///
            /// # Cancel safety
            ///
            /// A dropped future may or may not have removed the expiry.
            #[doc(alias = "persist")]
            #[doc(alias = "clearExpire")]
            pub async fn clear_expire(&self) -> Result<bool> {
                let keys: Vec<&str> = $keys(self);
                persist(self.inner(), &keys).await
            }

            #[doc = concat!("How long the ", $java, "'s count key `N` has left to live (`PTTL N`; Redisson's `remainTimeToLive`).")]
            ///
            /// # Errors
            ///
            /// A transient error after `retry_attempts` retries.
            ///
            /// # Cancel safety
            ///
            /// It only reads: dropping it at any point leaves nothing behind.
            #[doc(alias = "ttl")]
            #[doc(alias = "remainTimeToLive")]
            pub async fn remain_time_to_live(&self) -> Result<Ttl> {
                ttl(self.inner(), self.name()).await
            }
        }
    };
}

/// The keys of a semaphore: its count.
fn semaphore_keys(s: &Semaphore) -> Vec<&str> {
    vec![s.name()]
}

/// The keys of a permit-expirable semaphore: its count and the sorted set
/// of taken permits.
fn permit_semaphore_keys(s: &PermitExpirableSemaphore) -> Vec<&str> {
    vec![s.name(), s.timeouts_key()]
}

expirable!(Semaphore, "semaphore", semaphore_keys, "N");
expirable!(
    PermitExpirableSemaphore,
    "semaphore",
    permit_semaphore_keys,
    "N and `{N}:timeout`"
);

impl CountDownLatch {
    /// Whether the latch exists (`EXISTS N`; Redisson's `isExists`): it was
    /// set and has not been counted down to zero or deleted.
    ///
    /// Redisson's `RCountDownLatch` is no `RExpirable`, so the latch has no
    /// `expire` either: a latch that expired would open its awaiters with no
    /// message.
    ///
    /// # Errors
    ///
    /// A transient error after `retry_attempts` retries.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping it at any point leaves nothing behind.
    #[doc(alias = "isExists")]
    pub async fn exists(&self) -> Result<bool> {
        exists(self.inner(), self.name()).await
    }
}
