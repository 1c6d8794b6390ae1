//! The Lua scripts, embedded at compile time and run by EVALSHA, falling back
//! to EVAL (which also caches the script) when the server answers NOSCRIPT.

use std::sync::LazyLock;

/// One embedded script and its SHA1.
pub(crate) struct Script {
    pub body: &'static str,
    sha: LazyLock<String>,
}

/// `script!(NAME, "a.lua", "b.lua", ...)`: the files concatenated, in order
/// (a shared fragment first, then the script that uses it).
macro_rules! script {
    ($name:ident, $($file:literal),+) => {
        pub(crate) static $name: Script = Script {
            body: concat!($(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),+),
            sha: LazyLock::new(|| {
                fred::util::sha1_hash(concat!($(include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/lua/",
                    $file
                ))),+))
            }),
        };
    };
}

script!(LOCK, "lock.lua");
script!(UNLOCK, "unlock.lua");
script!(FORCE_UNLOCK, "force_unlock.lua");
script!(RENEW, "renew.lua");
script!(IS_LOCKED, "is_locked.lua");
script!(SPIN_UNLOCK, "spin_unlock.lua");
script!(DELETE, "delete.lua");
script!(FENCED_LOCK, "fenced_lock.lua");
script!(FAIR_LOCK, "fair_purge.lua", "fair_lock.lua");
script!(FAIR_LEAVE, "fair_leave.lua");
script!(FAIR_UNLOCK, "fair_purge.lua", "fair_unlock.lua");
script!(FAIR_FORCE_UNLOCK, "fair_purge.lua", "fair_force_unlock.lua");
script!(RW_READ_LOCK, "rw_read_lock.lua");
script!(RW_READ_UNLOCK, "rw_read_unlock.lua");
script!(RW_WRITE_LOCK, "rw_write_lock.lua");
script!(RW_WRITE_UNLOCK, "rw_write_unlock.lua");
script!(RW_READ_FORCE_UNLOCK, "rw_read_force_unlock.lua");
script!(RW_WRITE_FORCE_UNLOCK, "rw_write_force_unlock.lua");
script!(RW_READ_IS_LOCKED, "rw_read_is_locked.lua");
script!(RW_WRITE_IS_LOCKED, "rw_write_is_locked.lua");
script!(RW_RENEW_READ, "rw_renew_read.lua");

impl Script {
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }
}
