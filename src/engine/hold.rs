//! [`RawHold`]: one hold of a lock of any kind, released on unlock or drop.
//! The typed [`LockGuard`](crate::LockGuard) is a thin layer over it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::base::error::{Error, Result};
use crate::base::lost::{until_lost, LostReason};
use crate::base::owner::Owner;
use crate::connection::redis::Patience;
use crate::engine::armed::{Armed, GiveBack};
use crate::engine::background::Background;
use crate::engine::raw::{Acquired, RawLock};
use crate::engine::registry::{self, HoldKey, HoldTicket, Lease};
use crate::engine::renewal;
use crate::engine::unlock::{release, until_expiry, Whose};

/// One hold: the lock, its owner field, its lease, and what the registry
/// says of it. Unless unlocked or forgotten, dropping it releases the hold
/// in the background.
pub(crate) struct RawHold(Armed<Hold>);

/// What a [`RawHold`] holds.
pub(crate) struct Hold {
    raw: RawLock,
    owner: Owner,
    field: Arc<str>,
    lease: Lease,
    ticket: HoldTicket,
    token: Option<i64>,
}

impl Hold {
    fn not_held(&self) -> Error {
        Error::NotHeld {
            name: self.raw.name().to_owned(),
            owner: self.field.to_string(),
        }
    }
}

impl GiveBack for Hold {
    type Output = ();

    fn background(&self) -> &Background {
        &self.raw.inner().background
    }

    fn give_back(&self) -> BoxFuture<'static, Result<()>> {
        let (raw, field, hold, lease) = (
            self.raw.clone(),
            self.field.clone(),
            self.ticket.clone(),
            self.lease,
        );
        async move {
            let whose = Whose::Guard(&hold);
            release(
                raw.inner(),
                raw.proto.as_ref(),
                &field,
                lease,
                whose,
                Patience::Attempts,
            )
            .await
            .map(drop)
        }
        .boxed()
    }

    fn give_back_later(&self) -> BoxFuture<'static, ()> {
        let (raw, field, hold, lease) = (
            self.raw.clone(),
            self.field.clone(),
            self.ticket.clone(),
            self.lease,
        );
        let patience = until_expiry(raw.inner(), self.lease);
        async move {
            let whose = Whose::Guard(&hold);
            match release(raw.inner(), raw.proto.as_ref(), &field, lease, whose, patience).await {
                Ok(_) => {}
                // Its lease ran out, or it was lost and reported so: normal.
                Err(Error::NotHeld { .. }) => {
                    tracing::debug!(lock = raw.name(), "dropped guard's hold was already gone");
                }
                Err(e) => {
                    tracing::warn!(lock = raw.name(), error = %e, "background unlock of a dropped guard failed");
                }
            }
        }
        .boxed()
    }

    /// Kept in Redis without unlocking, and no longer renewed: it ends when
    /// its lease runs out.
    fn kept(&self) {
        self.raw
            .inner()
            .holds
            .forgot(self.raw.name(), &self.field, &self.ticket);
    }
}

impl RawHold {
    pub(crate) fn new(raw: &RawLock, acquired: Acquired) -> RawHold {
        RawHold(Armed::new(Hold {
            raw: raw.with_owner(acquired.owner),
            owner: acquired.owner,
            field: acquired.field,
            lease: acquired.lease,
            ticket: acquired.ticket,
            token: acquired.token,
        }))
    }

    fn held(&self) -> &Hold {
        self.0.get()
    }

    pub(crate) fn raw(&self) -> &RawLock {
        &self.held().raw
    }

    pub(crate) fn owner(&self) -> Owner {
        self.held().owner
    }

    pub(crate) fn field(&self) -> &str {
        &self.held().field
    }

    pub(crate) fn token(&self) -> Option<i64> {
        self.held().token
    }

    pub(crate) fn lease(&self) -> Option<Duration> {
        match self.held().lease {
            Lease::Fixed(d) => Some(d),
            Lease::Watchdog => None,
        }
    }

    pub(crate) fn expires_at(&self) -> Option<std::time::Instant> {
        self.held()
            .ticket
            .status
            .get()
            .expires
            .map(tokio::time::Instant::into_std)
    }

    /// Release this hold; dropping the future part-way still completes it
    /// in the background.
    pub(crate) async fn unlock(mut self) -> Result<()> {
        match self.unlock_now() {
            Some(call) => call.await,
            None => Ok(()),
        }
    }

    /// [`unlock`](Self::unlock) through `&mut` ([`Armed::give_back_now`]).
    pub(crate) fn unlock_now(&mut self) -> Option<BoxFuture<'static, Result<()>>> {
        self.0.give_back_now()
    }

    /// Keep the hold in Redis without unlocking it and stop renewing it:
    /// it ends when its lease runs out.
    pub(crate) fn keep(&mut self) {
        self.0.keep();
    }

    /// Whether this hold is still this guard's to act on: not known lost,
    /// and not taken away by an unlock without a guard (the registry still
    /// has it live).
    fn is_current(&self) -> bool {
        let held = self.held();
        !self.is_lost()
            && held
                .raw
                .inner()
                .holds
                .is_live(held.raw.name(), &held.field, &held.ticket)
    }

    /// Take the lock again with the same owner: try once, never wait. A
    /// hold known lost, or taken away by an unlock without a guard, is
    /// refused; a re-entry that finds the field gone from Redis (it took the
    /// lock afresh) is released again and refused: the new hold would not
    /// be this one's.
    pub(crate) async fn reenter(&self) -> Result<RawHold> {
        let held = self.held();
        if !self.is_current() {
            return Err(held.not_held());
        }
        let acquired = held
            .raw
            .acquire(Some(Duration::ZERO), held.lease)
            .await?
            .ok_or_else(|| held.not_held())?;
        let same = acquired.ticket.tenure == held.ticket.tenure;
        let hold = RawHold::new(&held.raw, acquired);
        if !same {
            if let Err(e) = hold.unlock().await {
                tracing::debug!(lock = held.raw.name(), error = %e, "releasing a re-entry that took the lock afresh failed");
            }
            return Err(held.not_held());
        }
        Ok(hold)
    }

    /// Make the hold last at least `lease` from now (its kind's renewal
    /// script, for this one hold: `max(PTTL, lease)`, never shorter); from
    /// then on it has that explicit lease and is not renewed.
    pub(crate) async fn extend(&mut self, lease: Duration) -> Result<()> {
        let held = self.held();
        let inner = held.raw.inner().clone();
        let name = held.raw.name();
        if !self.is_current() {
            return Err(held.not_held());
        }
        let renewal = held.raw.proto.renewal();
        // In the field's turn: a read unlock sets the owner's time to what
        // its holds need, which this may change.
        let order = inner.holds.order(name, &*held.field);
        let turn = order.order.clone().lock_owned().await;
        let key = HoldKey {
            name: name.to_owned(),
            field: held.field.clone(),
            tenure: held.ticket.tenure,
        };
        let sent_at = tokio::time::Instant::now();
        let reply = inner
            .redis
            .retrying(name, || {
                inner.redis.eval(|| renewal::one(renewal, &key, lease))
            })
            .await?;
        let found =
            crate::connection::script::parse_flags(reply, 1, "extend")?.first() == Some(&true);
        if !found {
            inner
                .holds
                .found_gone(name, &held.field, held.ticket.tenure, "extend");
            return Err(held.not_held());
        }
        if !inner
            .holds
            .extended(name, &held.field, &held.ticket, lease, sent_at)
        {
            return Err(held.not_held());
        }
        // The turn, then the use of the order (which may drop its entry).
        drop(turn);
        drop(order);
        self.0.get_mut().lease = Lease::Fixed(lease);
        Ok(())
    }

    pub(crate) async fn hold_count(&self) -> Result<u32> {
        self.held().raw.hold_count(&self.held().field).await
    }

    pub(crate) async fn is_held(&self) -> Result<bool> {
        self.held().raw.is_held(&self.held().field).await
    }

    /// Resolves once the hold is lost (see [`until_lost`]), to why. The
    /// tenure is watched on its channels from the moment it started (see
    /// [`crate::engine::watch`]), whether or not this is awaited.
    pub(crate) fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        until_lost(self.held().ticket.status.clone())
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        registry::lost_reason(&self.held().ticket.status)
    }
}
