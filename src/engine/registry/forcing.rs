//! A forced unlock through this client, as the registry sees it
//! (docs/PROTOCOL.md §2.9): the tenures it removed are told
//! `ForceUnlocked`, whatever else noticed the removal first, and the
//! tenures taken while it was under way are left to a check.

use std::sync::Arc;

use crate::base::lost::LostReason;
use crate::engine::registry::{end_tenure, Holds};

/// A forced unlock of one name under way. While it is, a hold of the name
/// found absent (by a renewal, a watcher, the hold check) is only marked:
/// the forced unlock's reply decides why it was lost.
/// [`done`](Self::done) applies the reply; dropping it unapplied (an
/// error, a cancelled call) counts as "removed nothing".
pub(crate) struct Forcing {
    holds: Arc<Holds>,
    name: String,
    /// Every tenure recorded before the unlock was sent has a smaller id:
    /// its acquisition ran in Redis before the unlock did.
    mark: u64,
    applied: bool,
}

impl Holds {
    /// A forced unlock of `name` through this client is about to be sent.
    pub(crate) fn forcing(self: &Arc<Self>, name: &str) -> Forcing {
        self.forcing.lock().push(name.to_owned());
        Forcing {
            holds: self.clone(),
            name: name.to_owned(),
            mark: self.next_id(),
            applied: false,
        }
    }

    /// Whether a forced unlock of `name` through this client is under way.
    pub(super) fn is_forcing(&self, name: &str) -> bool {
        self.forcing.lock().iter().any(|n| n == name)
    }
}

impl Forcing {
    /// Apply the forced unlock's reply: whether it removed the key. The
    /// tenures it then removed are lost (`ForceUnlocked`) and ended. Those
    /// recorded while it was under way may have been taken before it ran
    /// or after: returned as `(field, tenure)`, for the caller to check
    /// (a woken waiter of this client usually took the lock after it).
    pub(crate) fn done(mut self, unlocked: bool) -> Vec<(Arc<str>, u64)> {
        self.applied = true;
        self.apply(unlocked)
    }

    fn apply(&self, unlocked: bool) -> Vec<(Arc<str>, u64)> {
        let holds = &self.holds;
        let mut map = holds.map.lock();
        let last = {
            let mut forcing = holds.forcing.lock();
            if let Some(i) = forcing.iter().position(|n| *n == self.name) {
                forcing.swap_remove(i);
            }
            !forcing.contains(&self.name)
        };
        let mut ended = Vec::new();
        let mut unsure = Vec::new();
        for entry in map.get_mut(&self.name).into_iter().flatten() {
            let Some(tenure) = entry.tenure.as_mut() else {
                continue;
            };
            let field = &*entry.field;
            let reason = if unlocked && tenure.id < self.mark {
                LostReason::ForceUnlocked
            } else if tenure.gone && last {
                LostReason::Gone
            } else {
                if unlocked && !tenure.gone {
                    unsure.push((entry.field.clone(), tenure.id));
                }
                continue;
            };
            if !tenure.live.is_empty() && tenure.lose(reason) {
                tracing::warn!(
                    lock = self.name.as_str(),
                    owner = field,
                    "lock lost: {reason}"
                );
            }
            ended.push(entry.field.clone());
        }
        for field in ended {
            end_tenure(&mut map, &self.name, &field);
        }
        unsure
    }
}

impl Drop for Forcing {
    fn drop(&mut self) {
        if !self.applied {
            self.apply(false);
        }
    }
}
