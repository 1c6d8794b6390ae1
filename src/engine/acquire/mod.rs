//! The one acquisition core, for every lock kind, the multi-lock's members
//! and the synchronizers alike (docs/PROTOCOL.md §2.8, §7.4, §9.3): the
//! wait loop that drives a waiter's attempts ([`waiter`]), one attempt whose
//! outcome is never lost and is undone when nobody will use it or it is
//! unknown ([`attempt`]), and the step an acquisition that ends without
//! what it waited for gives up with ([`give_up`]). Each kind supplies only
//! its protocol: the call of one attempt, how to read its reply, what to
//! give back, and how its waiters are woken.
//!
//! Cancellation lives here, in two shapes: an attempt finished in the
//! background if its caller goes away ([`attempt::unlosable`]), and a
//! give-up step run in the background if it was not done
//! ([`give_up::GiveUp`]); both unit-tested without a server. (A guard's
//! give-back of what it holds is [`Armed`](crate::engine::armed::Armed).)

pub(crate) mod attempt;
pub(crate) mod give_up;
pub(crate) mod waiter;
