//! The Lua scripts, embedded at compile time and run by EVALSHA, falling back
//! to EVAL (which also caches the script) when the server answers NOSCRIPT.

use std::sync::LazyLock;
use std::time::Duration;

use fred::types::{Key, Value};

use crate::base::error::{Error, Result};

/// One embedded script and its SHA1.
pub(crate) struct Script {
    pub body: &'static str,
    /// Whether it writes (it starts with `args.lua`): followed by `WAIT`
    /// when [`Config::replica_sync`](crate::Config::replica_sync) is set.
    pub writes: bool,
    /// Shared, so that every call clones a reference, not the digits.
    /// Set by [`script!`] only.
    pub sha: LazyLock<fred::bytes_utils::Str>,
}

/// `script!(NAME, "a.lua", "b.lua", ...)`: the files concatenated, in order
/// (shared fragments first, then the script that uses them). Every script
/// that writes starts with `args.lua` and runs its checks before its first
/// write, so a bad argument is refused with nothing written; the read-only
/// `*is_locked` scripts go without.
///
/// After `args.lua` the rest runs as one function through its `run_body`,
/// which turns a `fail(message)` from any depth into the script's error reply:
/// Redis before 7 cannot report an error table raised by `error()`, so this is
/// how a check fails alike on Redis 6.2, 7 and Valkey.
///
/// Each kind declares the scripts it runs in its own module; this module
/// knows no script by name.
macro_rules! script {
    ($name:ident, "args.lua", $($file:literal),+) => {
        $crate::connection::script::script!(@make $name, true, concat!(
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/args.lua")),
            "\nreturn run_body(function()\n",
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),)+
            "\nend)\n"
        ));
    };
    ($name:ident, $($file:literal),+) => {
        $crate::connection::script::script!(@make $name, false, concat!(
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),+
        ));
    };
    (@make $name:ident, $writes:literal, $body:expr) => {
        pub(crate) static $name: $crate::connection::script::Script =
            $crate::connection::script::Script {
                body: $body,
                writes: $writes,
                sha: ::std::sync::LazyLock::new(|| ::fred::util::sha1_hash($body).into()),
            };
    };
}
pub(crate) use script;

impl Script {
    /// The script's SHA1, as a command argument (no copy).
    pub(crate) fn sha_value(&self) -> Value {
        Value::String(self.sha.clone())
    }
}

/// One script invocation.
#[derive(Clone)]
pub(crate) struct ScriptCall {
    pub script: &'static Script,
    pub keys: Vec<Key>,
    pub args: Vec<Value>,
}

impl ScriptCall {
    /// A call of `script` with `keys` made already (shared, cheap to clone).
    pub(crate) fn with_keys(
        script: &'static Script,
        keys: Vec<Key>,
        args: Vec<Value>,
    ) -> ScriptCall {
        ScriptCall { script, keys, args }
    }

    pub(crate) fn new(script: &'static Script, keys: &[&str], args: Vec<Value>) -> ScriptCall {
        ScriptCall {
            script,
            keys: keys.iter().map(|k| Key::from(*k)).collect(),
            args,
        }
    }
}

/// A duration as the integer milliseconds scripts take (saturating).
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Read a reply of one flag (`1` or `0`) per item of a batch of `expected`
/// (renewals, hold checks, permit renewals).
pub(crate) fn parse_flags(reply: Value, expected: usize, what: &str) -> Result<Vec<bool>> {
    match reply {
        Value::Array(items) if items.len() == expected => Ok(items
            .into_iter()
            .map(|v| matches!(v, Value::Integer(1)))
            .collect()),
        other => Err(Error::Protocol(format!("{what} replied {other:?}"))),
    }
}
