//! The Lua scripts, embedded at compile time and run by EVALSHA, falling back
//! to EVAL (which also caches the script) when the server answers NOSCRIPT.

use std::sync::LazyLock;

/// One embedded script and its SHA1.
pub(crate) struct Script {
    pub body: &'static str,
    sha: LazyLock<String>,
}

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: Script = Script {
            body: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),
            sha: LazyLock::new(|| {
                fred::util::sha1_hash(include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/lua/",
                    $file
                )))
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

impl Script {
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }
}
