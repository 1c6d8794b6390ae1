//! The lock engine, the same for every kind: the kinds as types, the generic
//! [`Lock`](crate::Lock) handle, the typed guard over the untyped hold, the
//! acquire/release loop and the wait loop the synchronizers share.
//!
//! # Glossary
//!
//! One meaning per word, here and in the modules below (docs/PROTOCOL.md
//! uses the same):
//!
//! * **kind**: a lock type as a Rust type (`Kind`: `Reentrant`, `Fair`, …);
//!   its **kind label** is the `&'static str` spans and metrics carry as
//!   `kind` (`"lock"`, `"fair_lock"`, `"semaphore"`, …), which
//!   `kind_label()` returns and fields named `kind` keep. A kind's
//!   **protocol** (`Protocol`) is its scripts and how their replies read;
//!   a non-reentrant kind (`NonReentrant`, `NonReentrantFair`) runs its
//!   reentrant sibling's protocol with re-entry refused.
//! * **owner field**: `<clientId>:<ownerId>` (`:write` for a write lock),
//!   the hash field Redisson keeps one count under per owner.
//! * **hold**: one successful acquisition, released exactly once (by its
//!   guard, its drop, or a guard-less unlock). `RawHold` is a hold as the
//!   engine keeps it; a guard is its typed face; its **ticket**
//!   (`registry::HoldTicket`) is how it names itself to the registry.
//! * **tenure**: the time one owner field holds the lock in Redis without a
//!   break, from its count going 0 → 1 until it is back to 0 or the field is
//!   gone; re-entries are further holds of the same tenure. The registry
//!   (`registry::Holds`) keeps one entry per tenure; a loss ends a tenure.
//! * **release**: giving one hold back (an unlock script run); a **forced
//!   unlock** removes every hold of a lock, whoever holds it.
//! * **give-back**: what a guard does with what it holds when it ends,
//!   awaited or in the background (`armed::GiveBack`): a hold's release, or
//!   a semaphore's permits.
//! * **background**: the client's one service for work that must finish
//!   though nobody awaits it (`background::Background`): a dropped guard's
//!   give-back, an attempt's undo, a give-up step; a shutdown waits for it,
//!   then stops it.
//! * **unlock latch**: the key `redisson_unlock_latch:{N}:<requestId>` that
//!   makes one release idempotent across retries (docs/PROTOCOL.md §2.4);
//!   a **permit latch** does the same for a semaphore's give-back (§7.1). A
//!   **count-down latch** is the synchronizer, nothing else.
//! * **renewal**: the watchdog moving a hold's (or a watchdog permit's)
//!   expiry forward; a **watch**: a tenure's listener for anything that can
//!   end it (its lock's channel, client tracking, keyspace events).
//! * **waiter**: a caller waiting to acquire, woken by its channel; a
//!   **watcher** or **listener** shares a channel's subscription without
//!   being woken as a waiter.

pub(crate) mod acquire;
pub(crate) mod armed;
pub(crate) mod background;
pub(crate) mod events;
pub(crate) mod hold;
pub(crate) mod permits;
pub(crate) mod protocol;
pub(crate) mod raw;
pub(crate) mod registration;
pub(crate) mod registry;
pub(crate) mod renewal;
pub(crate) mod script_env;
pub(crate) mod shared;
pub(crate) mod unlock;
pub(crate) mod watch;
pub(crate) mod watches;
