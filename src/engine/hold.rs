//! [`RawHold`]: one hold of a lock of any kind, released on unlock or drop.
//! The typed [`LockGuard`](crate::LockGuard) is a thin layer over it.

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::watch;

use crate::base::detach::Cleanups;
use crate::base::error::{Error, Result};
use crate::base::lost::LostReason;
use crate::base::owner::Owner;
use crate::client::holds::{self, Lease, Status};
use crate::client::renewal;
use crate::engine::armed::{Armed, GiveBack};
use crate::engine::raw::{release, until_expiry, Acquired, Patience, RawLock};

/// One hold: the lock, its owner field, its lease, and what the registry
/// says of it. Unless unlocked or forgotten, dropping it releases the hold
/// in the background.
pub(crate) struct RawHold(Armed<Hold>);

/// What a [`RawHold`] holds.
pub(crate) struct Hold {
    raw: RawLock,
    owner: Owner,
    field: String,
    lease: Lease,
    status: watch::Receiver<Status>,
    token: Option<i64>,
}

impl GiveBack for Hold {
    type Output = ();

    fn cleanups(&self) -> &Cleanups {
        &self.raw.inner().cleanups
    }

    fn give_back(&self) -> BoxFuture<'static, Result<()>> {
        let (raw, field) = (self.raw.clone(), self.field.clone());
        async move {
            release(raw.inner(), raw.proto.as_ref(), &field, Patience::Attempts)
                .await
                .map(drop)
        }
        .boxed()
    }

    fn give_back_later(&self) -> BoxFuture<'static, ()> {
        let (raw, field) = (self.raw.clone(), self.field.clone());
        let patience = until_expiry(raw.inner(), self.lease);
        async move {
            match release(raw.inner(), raw.proto.as_ref(), &field, patience).await {
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
        let _ = self
            .raw
            .inner()
            .holds
            .released(self.raw.name(), &self.field);
    }
}

impl RawHold {
    pub(crate) fn new(raw: &RawLock, acquired: Acquired) -> RawHold {
        RawHold(Armed::new(Hold {
            raw: raw.with_owner(acquired.owner),
            owner: acquired.owner,
            field: acquired.field,
            lease: acquired.lease,
            status: acquired.status,
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
            .status
            .borrow()
            .expires
            .map(tokio::time::Instant::into_std)
    }

    /// Release this hold; dropping the future part-way still completes it
    /// in the background.
    pub(crate) async fn unlock(self) -> Result<()> {
        self.0.release().await
    }

    /// Keep the hold in Redis without unlocking it and stop renewing it:
    /// it ends when its lease runs out.
    pub(crate) fn forget(self) {
        self.0.forget();
    }

    /// Take the lock again with the same owner: try once, never wait. A
    /// hold known lost, or no longer in Redis, is refused rather than taken
    /// afresh (the acquire script would take a free lock).
    pub(crate) async fn reenter(&self) -> Result<RawHold> {
        let not_held = || Error::NotHeld {
            name: self.held().raw.name().to_owned(),
            owner: self.held().field.clone(),
        };
        if self.is_lost() || !self.held().raw.is_held(&self.held().field).await? {
            return Err(not_held());
        }
        match self
            .held()
            .raw
            .acquire(Some(Duration::ZERO), self.held().lease)
            .await?
        {
            Some(acquired) => Ok(RawHold::new(&self.held().raw, acquired)),
            None => Err(not_held()),
        }
    }

    /// Set the hold's TTL to `lease` from now (its kind's renewal script,
    /// for this one hold), after any renewal run that has it in flight;
    /// from then on it has that explicit lease and is not renewed.
    pub(crate) async fn extend(&mut self, lease: Duration) -> Result<()> {
        let not_held = || Error::NotHeld {
            name: self.held().raw.name().to_owned(),
            owner: self.held().field.clone(),
        };
        if self.is_lost() {
            return Err(not_held());
        }
        let inner = self.held().raw.inner().clone();
        if let Some(run) = inner
            .holds
            .in_run(self.held().raw.name(), &self.held().field)
        {
            inner.holds.wait_for_run(run).await;
        }
        let renewal = self.held().raw.proto.renewal();
        let hold = [(self.held().raw.name().to_owned(), self.held().field.clone())];
        let lease_ms = fred::types::Value::Integer(crate::connection::script::millis(lease));
        let sent_at = tokio::time::Instant::now();
        let reply = inner
            .redis
            .retrying(self.held().raw.name(), || {
                inner.redis.eval(|| renewal.call(&hold, lease_ms.clone()))
            })
            .await?;
        let extended = renewal::parse_renewed(reply, 1)?.first() == Some(&true)
            && inner.holds.extended(
                self.held().raw.name(),
                &self.held().field,
                &self.held().status,
                lease,
                sent_at,
            );
        if !extended {
            inner.holds.lose(
                self.held().raw.name(),
                &self.held().field,
                &self.held().status,
            );
            return Err(not_held());
        }
        self.0.get_mut().lease = Lease::Fixed(lease);
        Ok(())
    }

    pub(crate) async fn hold_count(&self) -> Result<u32> {
        self.held().raw.hold_count(&self.held().field).await
    }

    pub(crate) async fn is_held(&self) -> Result<bool> {
        self.held().raw.is_held(&self.held().field).await
    }

    /// Resolves once the hold is lost (see [`holds::lost`]). Where the
    /// lock has a release channel, the hold is also re-checked at once
    /// whenever anything is published there, so a forced unlock by another
    /// client is noticed within a round trip, not at the next renewal.
    pub(crate) fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let lost = holds::lost(self.held().status.clone());
        let watch = self.held().raw.proto.release_channel().map(|channel| {
            watch_channel(
                self.held().raw.clone(),
                channel.to_owned(),
                self.held().field.clone(),
                self.held().status.clone(),
            )
        });
        async move {
            match watch {
                None => lost.await,
                Some(watch) => {
                    // The watcher never resolves: it marks the hold lost in
                    // the registry, which `lost` then reports.
                    tokio::select! {
                        reason = lost => reason,
                        () = watch => unreachable_pending().await,
                    }
                }
            }
        }
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        holds::lost_reason(&self.held().status)
    }
}

/// Watch the lock's release `channel` while the hold observed by `status`
/// lasts: check the hold when the subscription is made and after every
/// message, reconnect or lost connection, and mark it lost in the registry
/// when its field is gone (which resolves [`holds::lost`]). Never
/// resolves; its subscription ends when the hold is released, and it stops
/// watching at shutdown. A failed subscribe or check is tried again after
/// `retry_delay`: the renewal path still bounds how late a loss is noticed.
async fn watch_channel(
    raw: RawLock,
    channel: String,
    field: String,
    status: watch::Receiver<Status>,
) {
    let released = released(status.clone());
    let watching = async {
        let inner = raw.inner();
        let retry = inner.config.retry_delay.max(Duration::from_millis(1));
        loop {
            // After shutdown the hub is gone: the lease path alone tells.
            if inner.is_closing() {
                return;
            }
            let Ok(subscription) = inner.hub.watch(&channel).await else {
                tokio::time::sleep(retry).await;
                continue;
            };
            while !inner.is_closing() {
                let message = subscription.any_message();
                tokio::pin!(message);
                message.as_mut().enable();
                match raw.is_held(&field).await {
                    Ok(false) => {
                        inner.holds.lose(raw.name(), &field, &status);
                        return;
                    }
                    Ok(true) => message.await,
                    Err(_) => {
                        tokio::select! {
                            () = message => {}
                            () = tokio::time::sleep(retry) => {}
                        }
                    }
                }
            }
        }
    };
    tokio::select! {
        () = released => {}
        () = watching => {}
    }
    std::future::pending().await
}

/// Resolves when the registry drops the hold `status` observes (released).
async fn released(mut status: watch::Receiver<Status>) {
    while status.changed().await.is_ok() {}
}

/// A future that never resolves, of any output type.
async fn unreachable_pending<T>() -> T {
    std::future::pending().await
}
