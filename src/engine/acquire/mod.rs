//! The one acquisition core, for every lock kind, the multi-lock's members
//! and the synchronizers alike (docs/PROTOCOL.md §2.8, §7.4, §9.3), with one
//! way in, [`acquire`]: it owns the span, the wait loop that drives a
//! waiter's attempts ([`waiter`]) and the give-up step an acquisition that
//! ends without what it waited for runs ([`give_up`]); each attempt's
//! outcome is never lost, and is undone when nobody will use it or it is
//! unknown ([`attempt`]). A kind supplies only its
//! [`Attempts`](waiter::Attempts): the call of one attempt and how its
//! reply reads, what to give back, its give-up step, its channel and how
//! that wakes its waiters, its deadline and its label (a lock kind through
//! its `Protocol`, a synchronizer through [`acquire_with`]).
//!
//! Cancellation lives here, in two shapes: an attempt finished in the
//! background if its caller goes away ([`attempt::unlosable`]), and a
//! give-up step run in the background if it was not done
//! ([`give_up::GiveUp`]); both unit-tested without a server. (A guard's
//! give-back of what it holds is [`Armed`](crate::engine::armed::Armed).)

pub(crate) mod attempt;
mod entry;
pub(crate) mod give_up;
pub(crate) mod waiter;

pub(crate) use entry::{acquire, acquire_with, Wanted};
