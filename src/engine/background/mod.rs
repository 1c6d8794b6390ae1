//! The client's one background service: everything that must finish though
//! its caller went away or never waited (a dropped guard's release, an
//! attempt's undo, a fair waiter leaving the queue, a forced unlock's
//! bookkeeping, a give-back of permits) runs here as a counted task
//! ([`Background::spawn`]), which [`Client::shutdown`](crate::Client::shutdown)
//! waits for, then stops ([`Background::shut_down`]).
//!
//! Two ways in: a call finished here if the future awaiting it is dropped
//! ([`finish::FinishOnDrop`]), and a task spawned outright. What a task
//! retries depends on what it gives back: a lock's release until its hold
//! could have expired anyway ([`Patience`](crate::connection::redis::Patience)),
//! a semaphore's permits, which have no TTL, until they land or the
//! shutdown gives up on them ([`give_back::until_landed`], recorded in
//! [`pending::PendingReleases`] so that they can be counted and reported).

pub(crate) mod finish;
pub(crate) mod give_back;
pub(crate) mod pending;
mod service;

pub(crate) use finish::FinishOnDrop;
pub(crate) use service::Background;
