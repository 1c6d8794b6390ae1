//! Where Redisson keeps each kind's state: every key and channel derived from
//! a name, and the wire constants a reader of that state needs
//! (docs/PROTOCOL.md §1.4, §2.1, §4.1, §5.1, §6, §7). The crate derives its
//! own names here, and so may any tool that inspects or cleans up Redisson
//! state (the `redisson-lock` CLI does).
//!
//! Both derivation rules only ask whether the name contains `{` anywhere,
//! exactly as Redisson does, so every derived name lands in the name's
//! cluster slot. Names are the ones Redis sees: after any
//! [`NameMapper`](crate::NameMapper).
//!
//! ```
//! use redisson_lock::layout::{self, Layout};
//!
//! let orders = Layout::of("orders");
//! assert_eq!(orders.lock_channel, "redisson_lock__channel:{orders}");
//! assert_eq!(orders.fair_waiter_channel("c:7"), "redisson_lock__channel:{orders}:c:7");
//! assert_eq!(layout::lock_channel("{shop}:orders"), "redisson_lock__channel:{shop}:orders");
//! ```

/// `prefixName(P, N)`: `P:N` if `N` contains `{`, else `P:{N}`.
pub fn prefix_name(prefix: &str, name: &str) -> String {
    prefix_name_with_room(prefix, name, 0)
}

/// [`prefix_name`], sized for `room` more bytes (a key that goes on, such as
/// an unlock latch's: one allocation, not two).
fn prefix_name_with_room(prefix: &str, name: &str, room: usize) -> String {
    let (open, close) = if name.contains('{') {
        ("", "")
    } else {
        ("{", "}")
    };
    // Sized once; `format!` would grow it piece by piece.
    let mut key = String::with_capacity(prefix.len() + name.len() + 3 + room);
    for part in [prefix, ":", open, name, close] {
        key.push_str(part);
    }
    key
}

/// `suffixName(N, S)`: `N:S` if `N` contains `{`, else `{N}:S`.
pub fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        [name, ":", suffix].concat()
    } else {
        ["{", name, "}:", suffix].concat()
    }
}

/// The channel every RLock-layout lock (reentrant, non-reentrant, spin,
/// fenced) publishes its unlocks on; a fair lock's waiters listen on
/// per-waiter channels below it: `redisson_lock__channel:{N}`.
pub fn lock_channel(name: &str) -> String {
    prefix_name("redisson_lock__channel", name)
}

/// The prefix of every lock kind's unlock latches, to which `:<requestId>`
/// is appended: `redisson_unlock_latch:{N}`.
pub fn unlock_latch_prefix(name: &str) -> String {
    // Sized for the `:<requestId>` (32 hex digits) that follows.
    prefix_name_with_room("redisson_unlock_latch", name, 33)
}

/// A fair lock's wait queue (a list of owner fields): `redisson_lock_queue:{N}`.
pub fn fair_queue(name: &str) -> String {
    prefix_name("redisson_lock_queue", name)
}

/// A fair lock's waiters' deadlines (a sorted set): `redisson_lock_timeout:{N}`.
pub fn fair_timeouts(name: &str) -> String {
    prefix_name("redisson_lock_timeout", name)
}

/// A fenced lock's token counter: `redisson_lock_token:{N}`.
pub fn fence_token(name: &str) -> String {
    prefix_name("redisson_lock_token", name)
}

/// A read-write lock's channel: `redisson_rwlock:{N}`.
pub fn rw_channel(name: &str) -> String {
    prefix_name("redisson_rwlock", name)
}

/// The start of a read-write lock's reader timeout keys: `N` if it contains
/// `{`, else `{N}`.
pub fn rw_key_prefix(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// A reader's timeout key prefix, to which `:<k>` (its k-th hold) is
/// appended: `suffixName(N, field) + ":rwlock_timeout"`.
pub fn rw_timeout_prefix(name: &str, field: &str) -> String {
    format!("{}:rwlock_timeout", suffix_name(name, field))
}

/// Both semaphores' channel: `redisson_sc:{N}`.
pub fn semaphore_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

/// The prefix of a semaphore's permit latches, to which `:<id>` is
/// appended: `redisson_sc_latch:{N}`.
pub fn semaphore_latch_prefix(name: &str) -> String {
    prefix_name("redisson_sc_latch", name)
}

/// A permit-expirable semaphore's taken permits (a sorted set of ids by
/// expiry): `{N}:timeout`.
pub fn permit_timeouts(name: &str) -> String {
    suffix_name(name, "timeout")
}

/// A count-down latch's channel: `redisson_countdownlatch__channel__{N}`,
/// braces always (Redisson's own rule for this one name).
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// The client registry entry of the client `client_id` (a `<clientId>` of
/// an owner field): `redisson_lock_client:<clientId>`, a string of
/// `field=value` lines (`host`, `pid`, `name`, `version`, `started_ms`),
/// written by redisson-lock clients only (Redisson has no registry),
/// expiring unless refreshed (docs/PROTOCOL.md §9.6). Not a Redisson name:
/// the name mapper does not apply.
///
/// ```
/// assert_eq!(
///     redisson_lock::layout::client_key("7f0c8e9a-0000-4000-8000-000000000001"),
///     "redisson_lock_client:7f0c8e9a-0000-4000-8000-000000000001"
/// );
/// ```
pub fn client_key(client_id: &str) -> String {
    format!("redisson_lock_client:{client_id}")
}

/// The expiry score of a permit taken without a lease (Redisson's
/// `nonExpirableTimeout`).
pub const PERMIT_NEVER_EXPIRES: i64 = 922_337_203_685_477;

/// Owner ids from here up are the ones this crate generates (async
/// acquisitions, blocking threads); smaller ones are Java thread ids or
/// explicit [`Owner`](crate::Owner)s.
pub const GENERATED_OWNER_BASE: i64 = 1 << 48;

/// Every key and channel a name can have, for every kind.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layout {
    /// `N`: the lock hash of every lock kind, a semaphore's or a latch's count.
    pub name: String,
    /// [`lock_channel`].
    pub lock_channel: String,
    /// [`unlock_latch_prefix`].
    pub unlock_latch_prefix: String,
    /// [`fair_queue`].
    pub fair_queue: String,
    /// [`fair_timeouts`].
    pub fair_timeouts: String,
    /// [`fence_token`].
    pub fence_token: String,
    /// [`rw_channel`].
    pub rw_channel: String,
    /// [`rw_key_prefix`].
    pub rw_key_prefix: String,
    /// [`semaphore_channel`].
    pub semaphore_channel: String,
    /// [`semaphore_latch_prefix`].
    pub semaphore_latch_prefix: String,
    /// [`permit_timeouts`].
    pub permit_timeouts: String,
    /// [`latch_channel`].
    pub latch_channel: String,
}

impl Layout {
    /// The layout of the name `name` (as Redis sees it).
    pub fn of(name: &str) -> Layout {
        Layout {
            name: name.to_owned(),
            lock_channel: lock_channel(name),
            unlock_latch_prefix: unlock_latch_prefix(name),
            fair_queue: fair_queue(name),
            fair_timeouts: fair_timeouts(name),
            fence_token: fence_token(name),
            rw_channel: rw_channel(name),
            rw_key_prefix: rw_key_prefix(name),
            semaphore_channel: semaphore_channel(name),
            semaphore_latch_prefix: semaphore_latch_prefix(name),
            permit_timeouts: permit_timeouts(name),
            latch_channel: latch_channel(name),
        }
    }

    /// The channel a fair lock's waiter with owner field `field` listens on.
    pub fn fair_waiter_channel(&self, field: &str) -> String {
        format!("{}:{field}", self.lock_channel)
    }

    /// The timeout key of reader `field`'s `k`-th read hold.
    pub fn rw_reader_timeout(&self, field: &str, k: i64) -> String {
        format!("{}:{k}", rw_timeout_prefix(&self.name, field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_get_braces() {
        let l = Layout::of("orders");
        assert_eq!(l.lock_channel, "redisson_lock__channel:{orders}");
        assert_eq!(l.unlock_latch_prefix, "redisson_unlock_latch:{orders}");
        assert_eq!(l.fair_queue, "redisson_lock_queue:{orders}");
        assert_eq!(l.fair_timeouts, "redisson_lock_timeout:{orders}");
        assert_eq!(l.fence_token, "redisson_lock_token:{orders}");
        assert_eq!(l.rw_channel, "redisson_rwlock:{orders}");
        assert_eq!(l.rw_key_prefix, "{orders}");
        assert_eq!(l.semaphore_channel, "redisson_sc:{orders}");
        assert_eq!(l.semaphore_latch_prefix, "redisson_sc_latch:{orders}");
        assert_eq!(l.permit_timeouts, "{orders}:timeout");
        assert_eq!(
            l.latch_channel,
            "redisson_countdownlatch__channel__{orders}"
        );
        assert_eq!(
            l.rw_reader_timeout("u:57", 2),
            "{orders}:u:57:rwlock_timeout:2"
        );
    }

    #[test]
    fn names_with_a_brace_are_kept() {
        let l = Layout::of("{shop}:orders");
        assert_eq!(l.lock_channel, "redisson_lock__channel:{shop}:orders");
        assert_eq!(l.permit_timeouts, "{shop}:orders:timeout");
        assert_eq!(l.rw_key_prefix, "{shop}:orders");
        assert_eq!(
            l.rw_reader_timeout("u:57", 1),
            "{shop}:orders:u:57:rwlock_timeout:1"
        );
        // The latch channel always takes braces.
        assert_eq!(
            l.latch_channel,
            "redisson_countdownlatch__channel__{{shop}:orders}"
        );
        assert_eq!(
            prefix_name("redisson_lock__channel", "a{b}c"),
            "redisson_lock__channel:a{b}c"
        );
        assert_eq!(prefix_name("p", "a{b"), "p:a{b");
    }
}
