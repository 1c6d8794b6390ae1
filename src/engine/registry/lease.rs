//! How a hold's TTL is kept ([`Lease`]) and how one kind of hold is renewed
//! ([`Renewal`]), a batch of holds ([`HoldKey`]) at a time.

use std::time::Duration;

use fred::types::{Key, Value};

use crate::connection::script::{Script, ScriptCall};

/// One hold as the registry and a renewal batch name it.
#[derive(Clone, Debug)]
pub(crate) struct HoldKey {
    pub name: String,
    pub field: std::sync::Arc<str>,
    /// The tenure the hold belongs to (see the registry's docs).
    pub tenure: u64,
}

/// How a hold's TTL is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    /// `lock_watchdog_timeout`, renewed by the watchdog.
    Watchdog,
    /// A fixed lease chosen by the caller; the lock expires after it.
    Fixed(Duration),
}

impl Lease {
    /// The TTL this lease sets: its own, or the watchdog timeout.
    pub(crate) fn duration(self, watchdog: Duration) -> Duration {
        match self {
            Lease::Fixed(d) => d,
            Lease::Watchdog => watchdog,
        }
    }
}

/// How the watchdog renews (and `extend` lengthens, and the hold check
/// looks at) one kind of hold, handed to it by the lock kind: a batch
/// script whose KEYS and ARGV (after the lease in `ARGV[1]`) are every
/// hold's parts, one after the other. The registry knows no key layout;
/// it groups holds by script and appends their parts.
#[derive(Clone, Copy)]
pub(crate) struct Renewal {
    pub script: &'static Script,
    /// Append one hold's keys and arguments, for the lock `name` held by
    /// the owner `field`, to a batch call.
    pub append: fn(name: &str, field: &str, keys: &mut Vec<Key>, args: &mut Vec<Value>),
}

impl Renewal {
    /// Which group of a run this renewal's holds go to.
    pub(super) fn group(&self) -> usize {
        std::ptr::from_ref(self.script) as usize
    }

    /// The script call renewing `batch` (all of this renewal) to `lease_ms`.
    pub(crate) fn call(&self, batch: &[HoldKey], lease_ms: Value) -> ScriptCall {
        let mut keys = Vec::with_capacity(batch.len() * 2);
        let mut args = Vec::with_capacity(batch.len() * 2 + 1);
        args.push(lease_ms);
        for hold in batch {
            (self.append)(&hold.name, &hold.field, &mut keys, &mut args);
        }
        ScriptCall {
            script: self.script,
            keys,
            args,
        }
    }
}
