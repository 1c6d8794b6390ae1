//! [`RawHold`]: one hold of a lock of any kind, released on unlock or drop.
//! The typed [`LockGuard`](crate::LockGuard) is a thin layer over it.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;

use crate::base::detach::FinishOnDrop;
use crate::base::error::{Error, Result};
use crate::base::owner::Owner;
use crate::client::holds::{self, Lease, Status};
use crate::client::renewal;
use crate::engine::raw::{release, Acquired, Patience, RawLock};

/// One hold: the lock, its owner field, its lease, and what the registry
/// says of it. Unless unlocked or forgotten, dropping it releases the hold
/// in the background.
pub(crate) struct RawHold {
    raw: RawLock,
    owner: Owner,
    field: String,
    lease: Lease,
    status: watch::Receiver<Status>,
    token: Option<i64>,
    armed: bool,
}

impl RawHold {
    pub(crate) fn new(raw: &RawLock, acquired: Acquired) -> RawHold {
        RawHold {
            raw: raw.with_owner(acquired.owner),
            owner: acquired.owner,
            field: acquired.field,
            lease: acquired.lease,
            status: acquired.status,
            token: acquired.token,
            armed: true,
        }
    }

    pub(crate) fn raw(&self) -> &RawLock {
        &self.raw
    }

    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    pub(crate) fn field(&self) -> &str {
        &self.field
    }

    pub(crate) fn token(&self) -> Option<i64> {
        self.token
    }

    pub(crate) fn lease(&self) -> Option<Duration> {
        match self.lease {
            Lease::Fixed(d) => Some(d),
            Lease::Watchdog => None,
        }
    }

    pub(crate) fn expires_at(&self) -> Option<std::time::Instant> {
        self.status
            .borrow()
            .expires
            .map(tokio::time::Instant::into_std)
    }

    /// Release this hold; dropping the future part-way still completes it
    /// in the background.
    pub(crate) async fn unlock(mut self) -> Result<()> {
        self.armed = false;
        let (raw, field) = (self.raw.clone(), self.field.clone());
        let call = async move {
            release(raw.inner(), raw.proto.as_ref(), &field, Patience::Attempts)
                .await
                .map(drop)
        };
        FinishOnDrop::new(self.raw.inner().cleanups.clone(), call, |_| {
            async {}.boxed()
        })
        .await
    }

    /// Keep the hold in Redis without unlocking it and stop renewing it:
    /// it ends when its lease runs out.
    pub(crate) fn forget(mut self) {
        self.armed = false;
        let _ = self
            .raw
            .inner()
            .holds
            .released(self.raw.name(), &self.field);
    }

    /// Take the lock again with the same owner: try once, never wait. A
    /// hold known lost, or no longer in Redis, is refused rather than taken
    /// afresh (the acquire script would take a free lock).
    pub(crate) async fn reenter(&self) -> Result<RawHold> {
        let not_held = || Error::NotHeld {
            name: self.raw.name().to_owned(),
            owner: self.field.clone(),
        };
        if self.is_lost() || !self.raw.is_held(&self.field).await? {
            return Err(not_held());
        }
        match self.raw.acquire(Some(Duration::ZERO), self.lease).await? {
            Some(acquired) => Ok(RawHold::new(&self.raw, acquired)),
            None => Err(not_held()),
        }
    }

    /// Set the hold's TTL to `lease` from now (its kind's renewal script,
    /// for this one hold), after any renewal run that has it in flight;
    /// from then on it has that explicit lease and is not renewed.
    pub(crate) async fn extend(&mut self, lease: Duration) -> Result<()> {
        let not_held = || Error::NotHeld {
            name: self.raw.name().to_owned(),
            owner: self.field.clone(),
        };
        if self.is_lost() {
            return Err(not_held());
        }
        let inner = self.raw.inner().clone();
        if let Some(run) = inner.holds.in_run(self.raw.name(), &self.field) {
            inner.holds.wait_for_run(run).await;
        }
        let renewal = self.raw.proto.renewal();
        let hold = [(self.raw.name().to_owned(), self.field.clone())];
        let lease_ms = fred::types::Value::Integer(crate::connection::script::millis(lease));
        let sent_at = tokio::time::Instant::now();
        let reply = inner
            .redis
            .retrying(self.raw.name(), || {
                inner.redis.eval(|| renewal.call(&hold, lease_ms.clone()))
            })
            .await?;
        let extended = renewal::parse_renewed(reply, 1)?.first() == Some(&true)
            && inner
                .holds
                .extended(self.raw.name(), &self.field, &self.status, lease, sent_at);
        if !extended {
            inner.holds.lose(self.raw.name(), &self.field, &self.status);
            return Err(not_held());
        }
        self.lease = Lease::Fixed(lease);
        Ok(())
    }

    pub(crate) async fn hold_count(&self) -> Result<u32> {
        self.raw.hold_count(&self.field).await
    }

    pub(crate) async fn is_held(&self) -> Result<bool> {
        self.raw.is_held(&self.field).await
    }

    /// Resolves once the hold is lost (see [`holds::lost`]). Where the
    /// lock has a release channel, the hold is also re-checked at once
    /// whenever anything is published there, so a forced unlock by another
    /// client is noticed within a round trip, not at the next renewal.
    pub(crate) fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let lost = holds::lost(self.status.clone());
        let watch = self.raw.proto.release_channel().map(|channel| {
            watch_channel(
                self.raw.clone(),
                channel.to_owned(),
                self.field.clone(),
                self.status.clone(),
            )
        });
        async move {
            match watch {
                None => lost.await,
                Some(watch) => {
                    tokio::select! {
                        () = lost => {}
                        () = watch => {}
                    }
                }
            }
        }
    }

    pub(crate) fn is_lost(&self) -> bool {
        holds::is_lost(&self.status)
    }
}

impl Drop for RawHold {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (raw, field) = (self.raw.clone(), self.field.clone());
        self.raw.inner().cleanups.spawn(async move {
            let patience = Patience::UntilExpiry;
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
        });
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
