//! Redisson-compatible distributed locks on Redis for async and blocking
//! Rust, woken by pub/sub.
//!
//! A Rust task and a Java thread using Redisson's `RLock` on the same name
//! exclude each other, wake each other through Redis pub/sub, and read each
//! other's state: this crate writes the same hash, fields, TTLs, channels and
//! messages as Redisson (see the README for the versions covered).
//!
//! # Quick start
//!
//! Connect once, then take locks by name. The watchdog renews a lock taken
//! without a lease for as long as its guard lives; [`LockGuard::lost`]
//! resolves if the hold ends while you still hold the guard (forced open,
//! deleted, not renewed in time), so work that must not run unprotected
//! can stop.
//!
//! ```no_run
//! use std::time::Duration;
//! use redisson_lock::Client;
//!
//! # async fn demo() -> redisson_lock::Result<()> {
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = client.lock("orders")?;
//!
//! // Wait as long as it takes.
//! let guard = lock.lock().await?;
//! tokio::select! {
//!     reason = guard.lost() => eprintln!("lost the lock ({reason}): stop"),
//!     _ = async { /* critical section */ } => guard.unlock().await?,
//! }
//!
//! // Wait at most 2 s; then hold it for 10 s at most (no watchdog).
//! match lock.try_lock_for_with_lease(Duration::from_secs(2), Duration::from_secs(10)).await? {
//!     Some(guard) => guard.unlock().await?,
//!     None => eprintln!("busy"),
//! }
//! client.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! From code without an async runtime, the blocking client (feature
//! `blocking`, on by default) runs one of its own; a thread re-enters a lock
//! it holds, as a Java thread does:
//!
//! ```no_run
//! # #[cfg(feature = "blocking")]
//! # fn demo() -> redisson_lock::Result<()> {
//! let client = redisson_lock::blocking::BlockingClient::connect("redis://127.0.0.1:6379")?;
//! let lock = client.lock("orders")?;
//! let guard = lock.lock()?;
//! /* critical section */
//! guard.unlock()?;
//! client.shutdown()?;
//! # Ok(()) }
//! ```
//!
//! **Settings Java and Rust must share** on a name they both use: the
//! watchdog timeout ([`Config::lock_watchdog_timeout`], Java's
//! `lockWatchdogTimeout`, 30 s by default in both), the fair locks' wait
//! timeout ([`Config::fair_lock_wait_timeout`], Java's
//! `fairLockWaitTimeout`), a name mapper if Java uses one
//! ([`Config::name_mapper`], Java's `setNameMapper`), and on a Redis 7
//! cluster the pub/sub mode ([`Config::pubsub_mode`], Java's
//! `shardedSubscriptionMode`). docs/REDISSON.md maps every Redisson setting
//! and object.
//!
//! # Lock types
//!
//! Every kind `K` is a [`Lock<K>`](Lock) with the same methods, returning a
//! [`LockGuard<K>`](LockGuard): [`RLock`] (`client.lock`),
//! [`NonReentrantLock`] (`client.non_reentrant_lock`), [`FairLock`] and
//! [`NonReentrantFairLock`] (`client.fair_lock`,
//! `client.non_reentrant_fair_lock`), [`ReadLock`] and [`WriteLock`]
//! (`client.read_write_lock(name).read()` / `.write()`), [`SpinLock`]
//! (`client.spin_lock`) and [`FencedLock`] (`client.fenced_lock`). What a
//! kind cannot do does not compile: [`LockGuard::reenter`] exists for
//! reentrant kinds, `fencing_token` for fenced guards, `downgrade` for write
//! guards. [`MultiLock`] takes several locks, on one client or on
//! independent servers, as one (all of them, or a majority for RedLock);
//! [`Lock::into_erased`] lets it mix kinds.
//!
//! # Semaphores and count-down latch
//!
//! Redisson's synchronizers on the same keys, channels and messages:
//! [`Semaphore`] (`client.semaphore`, RSemaphore),
//! [`PermitExpirableSemaphore`] (`client.permit_expirable_semaphore`), whose
//! permits carry a [`PermitId`] and may expire, and [`CountDownLatch`]
//! (`client.count_down_latch`). Acquiring returns a permit guard
//! ([`SemaphorePermit`], [`PermitGuard`]) that gives the permits back when
//! released or dropped, like tokio's permits.
//!
//! # Owners
//!
//! Redisson names a holder `<clientId>:<threadId>`. Java threads run one thing
//! at a time; async tasks do not, so this crate's default is safer:
//!
//! * **Async, default**: every acquisition gets a fresh [`Owner`]. Two futures
//!   joined in one task exclude each other. Re-entering goes through the
//!   guard the first acquisition returned ([`LockGuard::reenter`]).
//! * **Async, explicit**: [`Lock::with_owner`] fixes the owner, like Redisson's
//!   `lockAsync(threadId)`; acquiring again with the same owner re-enters,
//!   and [`OwnedLock::unlock`] releases a hold without its guard.
//! * **Blocking**: `blocking` (feature `blocking`, on by default) uses one
//!   owner per OS thread, so a thread re-enters a lock it holds, as in Java.
//!
//! Each successful acquisition returns a guard that releases exactly one hold.
//!
//! ```no_run
//! # async fn demo() -> redisson_lock::Result<()> {
//! use redisson_lock::{Client, Owner};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = client.lock("orders")?;
//!
//! // Default: a fresh owner per acquisition; re-enter through the guard.
//! let outer = lock.lock().await?;
//! let inner = outer.reenter().await?;
//! assert_eq!(outer.hold_count().await?, 2);
//! inner.unlock().await?;
//! outer.unlock().await?;
//!
//! // Explicit owner: the same id re-enters, like a Java thread.
//! let worker = lock.with_owner(Owner::new(7));
//! let a = worker.lock().await?;
//! let b = worker.lock().await?; // re-enters at once
//! assert_eq!(lock.hold_count(Owner::new(7)).await?, 2);
//! b.unlock().await?;
//! a.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! # Waiting
//!
//! An uncontended acquire is one round trip (one `EVALSHA`). A waiter
//! subscribes to the lock's channel (one subscription per channel per
//! client, shared by all local waiters), tries again, then sleeps until an
//! unlock message, the holder's TTL, or its own deadline; it never polls.
//!
//! # Wire layout
//!
//! [`layout`] names every key and channel Redisson derives from a lock or
//! synchronizer name (`Layout::of("orders").lock_channel` is
//! `redisson_lock__channel:{orders}`), for tools that read or clean up that
//! state; docs/PROTOCOL.md states the whole contract.
//!
//! # Features
//!
//! * `blocking` (default): the `blocking` module and `Client::blocking`.
//! * `tls-rustls`: TLS (`rediss://`) through rustls with the *ring*
//!   provider; `tls-native-tls`: through native-tls (OpenSSL on Linux).
//!   Without either, a TLS URL is [`Error::Config`], never plaintext. A
//!   private CA goes into [`Config::redis`]`.tls` (README, *TLS*); a
//!   certificate that is not accepted is [`Error::Tls`].
//! * `sentinel-auth`: separate credentials for Sentinel nodes.
//! * `metrics`: counters, gauges and a histogram through the `metrics`
//!   facade (README, *Metrics*).
//!
//! No password shows in `Debug` of [`Config`] or [`Client`], in an
//! [`Error`], or in what the crate logs.
//!
//! # Observability
//!
//! Every acquisition, wait, release and watchdog renewal batch is a
//! `tracing` span (`redisson_lock.acquire`, `.wait`, `.release`, `.renew`)
//! with the lock's name, kind and outcome; lost locks, retries, reconnects and
//! re-subscriptions are events. With the `metrics` feature, the crate also
//! records through the `metrics` facade:
//!
//! | name | type | labels |
//! |---|---|---|
//! | `redisson_lock_acquisitions_total` | counter | `kind`, `outcome` |
//! | `redisson_lock_wait_seconds` | histogram (seconds) | `kind`, `outcome` |
//! | `redisson_lock_held` | gauge | `kind` |
//! | `redisson_lock_renewals_total` | counter | |
//! | `redisson_lock_renewal_failures_total` | counter | |
//! | `redisson_lock_lost_total` | counter | `kind`, `reason` (`gone`, `expired`, `force_unlocked`, `lease_ended`) |
//! | `redisson_lock_subscriptions` | gauge | |
//!
//! `outcome` is `acquired`, `busy`, `timeout`, `error` or `cancelled`;
//! `kind` is the client method that makes the lock (`lock`, `fair_lock`,
//! `semaphore`, …). The README describes every span field and metric.
//!
//! # Cancellation
//!
//! Every future may be dropped at any await point. A lock command already
//! sent is finished in the background and a hold it took is released; a
//! subscription is left when its last waiter goes; a dropped guard releases
//! its hold in the background. [`Client::shutdown`] ends it all gracefully.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Layers, read top-down, one folder each; a file imports only from its own
// folder and the folders below it:
// - `blocking`: the blocking API, a bridge over the async one;
// - `locks` (the lock kinds, `Lock`, `LockGuard`, `MultiLock`) and
//   `synchronizers` (semaphores, count-down latch): each kind's protocol and
//   scripts, its type and its factory;
// - `client`: the `Client` and its set-up;
// - `engine`: what every kind shares: the one acquisition core (attempt,
//   undo, give-up, wait, cancellation), the hold registry, renewal and the
//   release path;
// - `connection`: configuration, connecting, Redis commands and retries,
//   running scripts, pub/sub; it knows no lock kind;
// - `base`: errors, owners, wire names, back-off, background work, telemetry.
mod base;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod client;
mod connection;
mod engine;
mod locks;
mod synchronizers;

pub use base::backoff::BackOff;
pub use base::error::{Cause, Error, Result};
pub use base::layout;
pub use base::lost::{Lost, LostReason};
pub use base::mapper::{NameMapper, PrefixMapper};
pub use base::owner::Owner;
pub use base::time::MAX_DURATION;
pub use client::Client;
pub use connection::config::{Config, PubSubMode};
pub use engine::events::{ObjectEvent, ObjectEvents};
pub use locks::fair::{Fair, FairLock, NonReentrantFair, NonReentrantFairLock};
pub use locks::fenced::{Fenced, FencedLock};
pub use locks::guard::LockGuard;
pub use locks::kind::{AnyKind, Kind, ReentrantKind};
pub use locks::lock::{Lock, Ttl};
pub use locks::multi::{MultiGuard, MultiLock};
pub use locks::owned::OwnedLock;
pub use locks::rlock::{NonReentrant, NonReentrantLock, RLock, Reentrant};
pub use locks::rwlock::{Read, ReadLock, ReadWriteLock, Write, WriteLock};
pub use locks::spin::{Spin, SpinLock};
pub use synchronizers::count_down_latch::{CountDownLatch, LatchOpened};
pub use synchronizers::permit_id::{ParsePermitIdError, PermitId, PermitLease};
pub use synchronizers::permit_semaphore::{PermitExpirableSemaphore, PermitGuard};
pub use synchronizers::semaphore::{Semaphore, SemaphorePermit};

/// Re-export of the Redis client crate, for [`Config::redis`].
pub use fred;

/// The UUID type of [`Client::id`] (Redisson's client id, the first part of
/// every owner field), re-exported so that callers need no `uuid`
/// dependency of their own.
pub use uuid::Uuid;

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// docs/REDISSON.md's examples (the guide for Java shops), compiled as
/// doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../docs/REDISSON.md")]
pub struct RedissonGuideDoctests;
