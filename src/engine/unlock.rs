//! Taking one hold of a lock away (docs/PROTOCOL.md §2.3, §2.4, §2.9), for
//! every lock kind: the unlock script with a fresh latch id, resent with
//! that id while the latch makes the resend a replay, its reply applied to
//! the hold registry; nothing sent for a guard whose tenure has ended.

use std::sync::Arc;
use std::time::Duration;

use fred::types::Value;
use tokio::time::Instant;
use tracing::Instrument;

use crate::base::error::{Error, Result};
use crate::connection::redis::{Late, Patience};
use crate::engine::protocol::{Protocol, Unlock};
use crate::engine::registry::{HoldTicket, Lease, UnlockReply, Unlocking};
use crate::engine::shared::Inner;

/// Outcome of an unlock.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// The count went down but the owner still holds the lock.
    StillHeld,
    /// The lock was released and waiters notified.
    Released,
}

/// Which hold an unlock takes away.
pub(crate) enum Whose<'a> {
    /// A guard's: nothing is sent if its tenure has ended (the hold is no
    /// longer this client's to release).
    Guard(&'a HoldTicket),
    /// One of the owner field's, without a guard (`Lock::unlock`): one no
    /// guard has if there is one, else the newest guard's.
    Owner,
}

/// Take one hold of `field` away (docs/PROTOCOL.md §2.9): the unlock
/// script with a fresh latch id, retried with that same
/// id after transient errors, then the latch deleted, and the reply applied
/// to the registry. `lease` (the hold's) sizes the latch's TTL.
pub(crate) async fn release(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    whose: Whose<'_>,
    patience: Patience,
) -> Result<Unlocked> {
    let name = proto.name();
    // A guard's hold leaves its tenure's live holds at once (no longer
    // renewed, nor taken by an unlock without a guard); a hold whose tenure
    // has ended sends nothing, and needs no turn.
    if let Whose::Guard(hold) = whose {
        if let Unlocking::Stale = inner.holds.unlocking(name, field, hold) {
            return release_with(inner, proto, field, lease, Target::Stale, None, patience).await;
        }
    }
    // The rest in the field's turn (docs/PROTOCOL.md §2.9, *One turn per
    // owner field*): Redis cannot tell which tenure a decrement belongs to,
    // so no acquisition of the field may be sent while this release is, and
    // the tenure it is for is decided once every earlier step has landed. A
    // fresh take that ran first ended the guard's tenure: nothing is sent.
    let order = inner.holds.order(name, field);
    let _turn = order.order.clone().lock_owned().await;
    let target = match whose {
        Whose::Guard(hold) if inner.holds.is_current(name, field, hold.tenure) => {
            Target::Tenure(hold.tenure)
        }
        Whose::Guard(_) => Target::Stale,
        Whose::Owner => inner
            .holds
            .unlocking_any(name, field)
            .map_or(Target::Unknown, Target::Tenure),
    };
    // A read unlock sets the owner's remaining time to what its remaining
    // holds need: their guards are lowered to it first (in the turn, so no
    // re-entry or `extend` of the field lands in between).
    let need = match target {
        Target::Tenure(id) if proto.releases_to_need() => {
            inner.holds.remaining_need(name, field, id)
        }
        _ => None,
    };
    release_with(inner, proto, field, lease, target, need, patience).await
}

/// Which tenure an unlock applies to.
#[derive(Clone, Copy)]
enum Target {
    /// This one, the field's current tenure.
    Tenure(u64),
    /// One the registry does not know (an undo of an unknown outcome, an
    /// unlock without a guard of a field the registry has no tenure for).
    Unknown,
    /// None: the guard's tenure ended, the hold is not this client's to
    /// release. Nothing is sent; the outcome is `NotHeld`.
    Stale,
}

/// Release in the field's turn, already held by the caller: the undo of an
/// attempt, or the release of the hold a cancelled attempt took (`ticket`,
/// recorded in the registry; `None`: an attempt whose outcome is unknown).
pub(crate) async fn release_in_turn(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    ticket: Option<&HoldTicket>,
    patience: Patience,
) -> Result<Unlocked> {
    let target = match ticket {
        Some(ticket) => match inner.holds.unlocking(proto.name(), field, ticket) {
            Unlocking::Send => Target::Tenure(ticket.tenure),
            // Found gone meanwhile: the unlock finds nothing, harmlessly.
            Unlocking::Stale => Target::Unknown,
        },
        None => Target::Unknown,
    };
    release_with(inner, proto, field, lease, target, None, patience).await
}

/// Send the unlock of one hold of `field` of `target` (`need`: what the
/// owner's remaining holds need, where the kind sets it), in a
/// `redisson_lock.release` span, and apply its reply to the registry.
async fn release_with(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    target: Target,
    need: Option<Duration>,
    patience: Patience,
) -> Result<Unlocked> {
    let span = tracing::debug_span!(
        "redisson_lock.release",
        lock = proto.name(),
        kind = proto.kind_label(),
        owner = field,
        background = patience != Patience::Attempts,
        outcome = tracing::field::Empty,
        error = tracing::field::Empty,
    );
    let outcome = if let Target::Stale = target {
        Err(Error::NotHeld {
            name: proto.name().to_owned(),
            owner: field.to_owned(),
        })
    } else {
        // Pinned in place, as in `acquire`.
        let releasing = std::pin::pin!(unlock(inner, proto, field, lease, need, patience));
        releasing.instrument(span.clone()).await
    };
    let reply = match &outcome {
        Ok(Unlocked::Released) => Some(UnlockReply::Released),
        Ok(Unlocked::StillHeld) => Some(UnlockReply::StillHeld),
        Err(Error::NotHeld { .. }) => Some(UnlockReply::NotHeld),
        Err(_) => None,
    };
    if let (Target::Tenure(tenure), Some(reply)) = (target, reply) {
        inner.holds.unlocked(proto.name(), field, tenure, reply);
    }
    match &outcome {
        Ok(Unlocked::Released) => span.record("outcome", "released"),
        Ok(Unlocked::StillHeld) => span.record("outcome", "still_held"),
        Err(Error::NotHeld { .. }) => span.record("outcome", "not_held"),
        Err(e) => span
            .record("outcome", "error")
            .record("error", tracing::field::display(e)),
    };
    outcome
}

/// The unlock script for one hold of `field`, with its latch.
async fn unlock(
    inner: &Arc<Inner>,
    proto: &dyn Protocol,
    field: &str,
    lease: Lease,
    need: Option<Duration>,
    patience: Patience,
) -> Result<Unlocked> {
    let latch = crate::base::keys::into_latch_key(proto.latch_prefix());
    let lease = lease.duration(inner.config.lock_watchdog_timeout);
    let lease_ms = crate::connection::script::millis(lease);
    // Every resend carries the first try's latch, which makes it a replay
    // only while that latch lives: a resend is never written after then
    // (less a timeout for its trip), or an earlier try that ran, its reply
    // lost, could be followed by a second decrement (docs/PROTOCOL.md §2.4).
    let timeout = inner.config.timeout;
    let latest = Instant::now() + inner.env.unlock_latch_ttl(lease).saturating_sub(timeout);
    let tried = std::sync::atomic::AtomicBool::new(false);
    // Rounded up: never less than the holds need.
    let need_ms = need.map(|d| {
        crate::connection::script::millis(d.saturating_add(Duration::from_nanos(999_999)))
    });
    let unlock = || {
        let first = !tried.swap(true, std::sync::atomic::Ordering::Relaxed);
        let left = latest.saturating_duration_since(Instant::now());
        let latch = &latch;
        let unlock = Unlock {
            field,
            lease_ms,
            latch,
            need_ms,
        };
        let build = move || proto.unlock_call(&inner.env, unlock);
        async move {
            if first {
                inner.redis.eval_as(build, Late::Deliver).await
            } else if left.is_zero() {
                Err(Error::Timeout(timeout))
            } else {
                inner
                    .redis
                    .eval_as(build, Late::SkipAfter(left.min(timeout)))
                    .await
            }
        }
    };
    let name = proto.name();
    let reply = inner.redis.patiently(name, patience, unlock).await?;
    inner.delete_latch_later(latch);
    match reply {
        Value::Null => Err(Error::NotHeld {
            name: proto.name().to_owned(),
            owner: field.to_owned(),
        }),
        Value::Integer(0) => Ok(Unlocked::StillHeld),
        Value::Integer(1) => Ok(Unlocked::Released),
        other => Err(Error::Protocol(format!("unlock replied {other:?}"))),
    }
}

/// How long a release nobody awaits keeps trying: until a hold with
/// `lease`, taken or renewed now at the latest, has run out, when Redis
/// releases it anyway.
pub(crate) fn until_expiry(inner: &Inner, lease: Lease) -> Patience {
    Patience::Until(Instant::now() + lease.duration(inner.config.lock_watchdog_timeout))
}
