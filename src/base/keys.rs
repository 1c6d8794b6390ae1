//! The script keys of one lock with RLock's layout ([`LockKeys`], derived
//! per [`layout`](crate::layout)), and unlock latch keys.

use std::sync::OnceLock;

use fred::types::Key;

use crate::base::error::Result;
use crate::base::layout;
use crate::base::mapper::validate;

/// The keys and channel of one RLock.
#[derive(Debug)]
pub(crate) struct LockKeys {
    /// `N`, the hash.
    pub name: String,
    /// `redisson_lock__channel:{N}`.
    pub channel: String,
    /// `name` and `channel` as script keys, made on first use: a clone
    /// shares the bytes, where a key made per call copies them.
    name_key: OnceLock<Key>,
    channel_key: OnceLock<Key>,
}

impl LockKeys {
    pub(crate) fn new(name: &str) -> Result<LockKeys> {
        LockKeys::from_name(name.to_owned())
    }

    /// [`new`](Self::new), keeping the caller's `name` rather than a copy.
    pub(crate) fn from_name(name: String) -> Result<LockKeys> {
        validate(&name)?;
        Ok(LockKeys {
            channel: layout::lock_channel(&name),
            name,
            name_key: OnceLock::new(),
            channel_key: OnceLock::new(),
        })
    }

    /// `name` as a script key.
    pub(crate) fn name_key(&self) -> Key {
        shared_key(&self.name_key, &self.name)
    }

    /// `channel` as a script key.
    pub(crate) fn channel_key(&self) -> Key {
        shared_key(&self.channel_key, &self.channel)
    }
}

/// The key cached in `cell` (made from `key` the first time), cloned.
fn shared_key(cell: &OnceLock<Key>, key: &str) -> Key {
    cell.get_or_init(|| {
        // Made shared now: the first clone of a key made from a `Vec`
        // would allocate for that.
        Key::from(fred::bytes::Bytes::from_owner(key.to_owned()))
    })
    .clone()
}

/// A fresh latch key: `prefix:` plus 32 random lowercase hex digits, one per
/// logical call: an unlock latch on an unlock latch prefix (docs/PROTOCOL.md
/// §2.4), a permit latch on a semaphore's (§7.1).
pub(crate) fn latch_key(prefix: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + 1 + uuid::fmt::Simple::LENGTH);
    key.push_str(prefix);
    into_latch_key(key)
}

/// [`latch_key`] made of `prefix` itself (an unlock makes its prefix
/// anew: no second copy of it).
pub(crate) fn into_latch_key(mut prefix: String) -> String {
    let mut id = [0u8; uuid::fmt::Simple::LENGTH];
    let id: &str = uuid::Uuid::new_v4().simple().encode_lower(&mut id);
    prefix.reserve_exact(1 + id.len());
    prefix.push(':');
    prefix.push_str(id);
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latch_ids_are_32_hex() {
        let keys = LockKeys::new("orders").unwrap();
        let latch = latch_key(&layout::unlock_latch_prefix(&keys.name));
        let id = latch
            .strip_prefix("redisson_unlock_latch:{orders}:")
            .unwrap();
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn empty_name_is_refused() {
        assert!(matches!(
            LockKeys::new(""),
            Err(crate::base::error::Error::InvalidName { .. })
        ));
    }
}
