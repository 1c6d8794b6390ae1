//! The Lua scripts, embedded at compile time and run by EVALSHA, falling back
//! to EVAL (which also caches the script) when the server answers NOSCRIPT.

use std::sync::LazyLock;
use std::time::Duration;

use fred::types::{Key, Value};

use crate::base::owner::Owner;
use crate::base::time::MAX_DURATION;
use crate::connection::config::Config;

/// One embedded script and its SHA1.
pub(crate) struct Script {
    pub body: &'static str,
    /// Whether it writes (it starts with `args.lua`): followed by `WAIT`
    /// when [`Config::replica_sync`](crate::Config::replica_sync) is set.
    pub writes: bool,
    /// Shared, so that every call clones a reference, not the digits.
    sha: LazyLock<fred::bytes_utils::Str>,
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
macro_rules! script {
    ($name:ident, "args.lua", $($file:literal),+) => {
        script!(@make $name, true, concat!(
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/args.lua")),
            "\nreturn run_body(function()\n",
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),)+
            "\nend)\n"
        ));
    };
    ($name:ident, $($file:literal),+) => {
        script!(@make $name, false, concat!(
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),+
        ));
    };
    (@make $name:ident, $writes:literal, $body:expr) => {
        pub(crate) static $name: Script = Script {
            body: $body,
            writes: $writes,
            sha: LazyLock::new(|| fred::util::sha1_hash($body).into()),
        };
    };
}

/// What a script call takes from its client beyond the lock's or
/// synchronizer's own keys: the publish command resolved at connect, the
/// client id that starts every owner field, and the settings that size
/// unlock latches and fair-lock waits. Built once per client; the kinds'
/// call builders read nothing else, so each can be checked without a server.
#[derive(Debug, Clone)]
pub(crate) struct ScriptEnv {
    publish: &'static str,
    client_id: String,
    fair_wait: Duration,
    timeout: Duration,
    retry_delay: Duration,
    retry_attempts: u32,
}

impl ScriptEnv {
    /// The environment of a client with `config`, id `client_id`,
    /// publishing with `publish` (`PUBLISH`, `SPUBLISH` or `BOTH`).
    pub(crate) fn new(config: &Config, client_id: String, publish: &'static str) -> ScriptEnv {
        ScriptEnv {
            publish,
            client_id,
            fair_wait: config.fair_lock_wait_timeout,
            timeout: config.timeout,
            retry_delay: config.retry_delay,
            retry_attempts: config.retry_attempts,
        }
    }

    /// The publish command, as a script argument.
    pub(crate) fn publish(&self) -> Value {
        // Static: no copy.
        Value::String(fred::bytes_utils::Str::from_static(self.publish))
    }

    /// The hash field of `owner`: `<clientId>:<ownerId>`.
    pub(crate) fn field(&self, owner: Owner) -> String {
        use std::fmt::Write;
        // Sized once (an id is at most 20 characters): `format!` would
        // grow it piece by piece.
        let mut field = String::with_capacity(self.client_id.len() + 21);
        field.push_str(&self.client_id);
        field.push(':');
        let _ = write!(field, "{owner}"); // writing to a String cannot fail
        field
    }

    /// Redisson's default fair-lock thread wait (`fair_lock_wait_timeout`).
    pub(crate) fn fair_wait(&self) -> Duration {
        self.fair_wait
    }

    /// TTL of the unlock idempotency latch of a hold with `lease`: long
    /// enough to cover every resend of one unlock (docs/PROTOCOL.md §2.4), both
    /// an awaited one (the first try and `retry_attempts` more, each up to
    /// `timeout` after a pause up to `retry_delay`) and a background one
    /// (resent until the lease could have ended, the last reply up to
    /// `timeout` later). At most [`MAX_DURATION`].
    pub(crate) fn latch_ttl(&self, lease: Duration) -> Duration {
        let awaited = self
            .timeout
            .saturating_add(self.retry_delay)
            .saturating_mul(self.retry_attempts.saturating_add(1));
        let background = lease.saturating_add(self.timeout);
        awaited.max(background).min(MAX_DURATION)
    }

    /// [`latch_ttl`](Self::latch_ttl) of a lease of `lease_ms`, as a
    /// script argument in milliseconds.
    pub(crate) fn latch_ttl_ms(&self, lease_ms: i64) -> Value {
        Value::Integer(millis(
            self.latch_ttl(Duration::from_millis(lease_ms.unsigned_abs())),
        ))
    }
}

script!(LOCK, "args.lua", "lock.lua");
script!(UNLOCK, "args.lua", "unlock.lua");
script!(FORCE_UNLOCK, "args.lua", "force_unlock.lua");
script!(RENEW, "args.lua", "renew.lua");
script!(IS_LOCKED, "is_locked.lua");
script!(HELD, "held.lua");
script!(SPIN_UNLOCK, "args.lua", "spin_unlock.lua");
script!(DELETE, "args.lua", "delete.lua");
script!(FENCED_LOCK, "args.lua", "fenced_lock.lua");
script!(FAIR_LOCK, "args.lua", "fair_purge.lua", "fair_lock.lua");
script!(FAIR_LEAVE, "args.lua", "fair_leave.lua");
script!(FAIR_UNLOCK, "args.lua", "fair_purge.lua", "fair_unlock.lua");
script!(
    FAIR_FORCE_UNLOCK,
    "args.lua",
    "fair_purge.lua",
    "fair_force_unlock.lua"
);
script!(RW_READ_LOCK, "args.lua", "rw_read_lock.lua");
script!(RW_READ_UNLOCK, "args.lua", "rw_read_unlock.lua");
script!(RW_WRITE_LOCK, "args.lua", "rw_write_lock.lua");
script!(RW_WRITE_UNLOCK, "args.lua", "rw_write_unlock.lua");
script!(RW_READ_FORCE_UNLOCK, "args.lua", "rw_read_force_unlock.lua");
script!(
    RW_WRITE_FORCE_UNLOCK,
    "args.lua",
    "rw_write_force_unlock.lua"
);
script!(RW_READ_IS_LOCKED, "rw_read_is_locked.lua");
script!(RW_WRITE_IS_LOCKED, "rw_write_is_locked.lua");
script!(RW_RENEW_READ, "args.lua", "rw_renew_read.lua");
script!(
    SEMAPHORE_ACQUIRE,
    "args.lua",
    "count.lua",
    "semaphore_acquire.lua"
);
script!(
    SEMAPHORE_RELEASE,
    "args.lua",
    "count.lua",
    "semaphore_release.lua"
);
script!(
    SEMAPHORE_RELEASE_IF_EXISTS,
    "args.lua",
    "count.lua",
    "semaphore_release_if_exists.lua"
);
script!(
    SEMAPHORE_TRY_SET,
    "args.lua",
    "count.lua",
    "semaphore_try_set.lua"
);
script!(SEMAPHORE_ADD, "args.lua", "count.lua", "semaphore_add.lua");
script!(
    SEMAPHORE_DRAIN,
    "args.lua",
    "count.lua",
    "semaphore_drain.lua"
);
script!(
    PES_ACQUIRE,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_acquire.lua"
);
script!(
    PES_RELEASE,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_release.lua"
);
script!(
    PES_RELEASE_MANY,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_release_many.lua"
);
script!(
    PES_COUNTS,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_counts.lua"
);
script!(
    PES_SET_PERMITS,
    "args.lua",
    "count.lua",
    "pes_set_permits.lua"
);
script!(
    PES_UPDATE_LEASE,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_update_lease.lua"
);
script!(
    PES_LEASE_TIME,
    "args.lua",
    "count.lua",
    "pes_reclaim.lua",
    "pes_lease_time.lua"
);
script!(LATCH_TRY_SET, "args.lua", "count.lua", "latch_try_set.lua");
script!(
    LATCH_COUNT_DOWN,
    "args.lua",
    "count.lua",
    "latch_count_down.lua"
);
script!(LATCH_DELETE, "args.lua", "latch_delete.lua");

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
