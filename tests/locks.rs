//! The lock kinds against a real `redis-server`: every kind through the one
//! generic `Lock<K>` API ([`kinds`]), the exact Redis state after each
//! operation ([`state`]), mutual exclusion and waking by publish
//! ([`contention`]), watchdog renewal and the lost signal ([`watchdog`]), the
//! fair lock ([`fair`]), the read-write lock ([`rwlock`]), and the spin,
//! fenced, multi- and Red- locks ([`family`]), and fencing tokens across a
//! server's data loss ([`data_loss`]).
mod common;

#[path = "locks/contention.rs"]
mod contention;
#[path = "locks/data_loss.rs"]
mod data_loss;
#[path = "locks/fair.rs"]
mod fair;
#[path = "locks/family.rs"]
mod family;
#[path = "locks/kinds.rs"]
mod kinds;
#[path = "locks/rwlock.rs"]
mod rwlock;
#[path = "locks/state.rs"]
mod state;
#[path = "locks/watchdog.rs"]
mod watchdog;
