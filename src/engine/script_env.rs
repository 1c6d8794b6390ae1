//! What a lock's script call takes from its client beyond the lock's own
//! keys: the publish command, the client id that starts every owner field,
//! and the settings that size unlock latches and fair-lock waits.

use std::time::Duration;

use fred::types::Value;

use crate::base::owner::Owner;
use crate::base::time::MAX_DURATION;
use crate::connection::config::Config;
use crate::connection::script::millis;

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
    pub(crate) fn unlock_latch_ttl(&self, lease: Duration) -> Duration {
        let awaited = self
            .timeout
            .saturating_add(self.retry_delay)
            .saturating_mul(self.retry_attempts.saturating_add(1));
        let background = lease.saturating_add(self.timeout);
        awaited.max(background).min(MAX_DURATION)
    }

    /// [`unlock_latch_ttl`](Self::unlock_latch_ttl) of a lease of `lease_ms`, as a
    /// script argument in milliseconds.
    pub(crate) fn unlock_latch_ttl_ms(&self, lease_ms: i64) -> Value {
        Value::Integer(millis(
            self.unlock_latch_ttl(Duration::from_millis(lease_ms.unsigned_abs())),
        ))
    }
}
