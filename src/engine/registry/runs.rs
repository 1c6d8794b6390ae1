//! The registry's side of the watchdog: which tenures a renewal run or a
//! hold check covers, and what their replies do (docs/PROTOCOL.md §2.6,
//! §2.9).

use std::collections::HashMap;

use tokio::time::Instant;

use crate::base::error::Error;
use crate::base::lost::LostReason;
use crate::base::telemetry;
use crate::engine::registry::lease::Renewal;
use crate::engine::registry::tenure::Tenure;
use crate::engine::registry::{end_tenure, tenure_mut, HoldKey, Holds};

impl Holds {
    /// Pick the tenures to renew now, grouped by renewal script and, on a
    /// cluster, by hash slot (one script may only touch keys of one slot,
    /// docs/PROTOCOL.md §2.6). A renewed tenure whose status is past its
    /// certainty is marked lost instead. Tenures without live holds whose
    /// certainty has passed are forgotten (their keys expire by
    /// themselves).
    pub(crate) fn due(&self, by_slot: bool) -> HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> {
        self.group(by_slot, |name, field, tenure, now| {
            if !tenure.renewed() {
                return false;
            }
            if tenure.lost_at(now).is_some() {
                tracing::warn!(
                    lock = name,
                    owner = field,
                    "lock lost: not renewed before its lease could have run out"
                );
                tenure.lose(LostReason::NotRenewed);
                return false;
            }
            true
        })
    }

    /// Every tenure with live holds, grouped as [`due`](Self::due) groups
    /// them, for a check that their fields still exist.
    pub(crate) fn held(&self, by_slot: bool) -> HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> {
        self.group(by_slot, |_, _, tenure, _| !tenure.live.is_empty())
    }

    fn group(
        &self,
        by_slot: bool,
        mut pick: impl FnMut(&str, &str, &mut Tenure, Instant) -> bool,
    ) -> HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> {
        let now = Instant::now();
        let mut groups: HashMap<(usize, u16), (Renewal, Vec<HoldKey>)> = HashMap::new();
        let mut map = self.map.lock();
        let mut forgotten = Vec::new();
        for (name, entries) in map.iter_mut() {
            let slot = if by_slot {
                fred::util::redis_keyslot(name.as_bytes())
            } else {
                0
            };
            for entry in entries.iter_mut() {
                let Some(tenure) = entry.tenure.as_mut() else {
                    continue;
                };
                // No guard left and past its certainty: its key expires by
                // itself. (Not while a command of the field is under way.)
                if tenure.live.is_empty() && now >= tenure.certain {
                    if entry.order.try_lock().is_ok() {
                        forgotten.push((name.clone(), entry.field.clone()));
                    }
                    continue;
                }
                if pick(name, &entry.field, tenure, now) {
                    groups
                        .entry((tenure.renewal.group(), slot))
                        .or_insert_with(|| (tenure.renewal, Vec::new()))
                        .1
                        .push(HoldKey {
                            name: name.clone(),
                            field: entry.field.clone(),
                            tenure: tenure.id,
                        });
                }
            }
        }
        for (name, field) in forgotten {
            end_tenure(&mut map, &name, &field);
        }
        groups
    }

    /// The earliest time any hold of `batch` stops being certain: a
    /// renewal of the batch must not run past it.
    pub(crate) fn batch_valid_until(&self, batch: &[HoldKey]) -> Option<Instant> {
        let mut map = self.map.lock();
        batch
            .iter()
            .filter_map(|h| tenure_mut(&mut map, &h.name, &h.field, h.tenure).map(|t| t.certain))
            .min()
    }

    /// Apply the outcome of renewing `batch`, sent at `sent_at`; what
    /// became of its holds.
    pub(crate) fn apply(
        &self,
        batch: &[HoldKey],
        outcome: &Result<Vec<bool>, Error>,
        sent_at: Instant,
    ) -> Tally {
        let now = Instant::now();
        let mut tally = Tally::default();
        let mut map = self.map.lock();
        let mut gone = Vec::new();
        for (i, key) in batch.iter().enumerate() {
            let Some(tenure) = tenure_mut(&mut map, &key.name, &key.field, key.tenure) else {
                continue;
            };
            // A tenure whose last live hold is being released: the renewal
            // may have run after that release.
            if !tenure.renewed() {
                continue;
            }
            let late = tenure.lost_at(now).is_some();
            let (lock, owner) = (key.name.as_str(), &*key.field);
            match outcome {
                // A confirmation that comes after the hold stopped being
                // certain does not revive it: its guards may already have
                // reported it lost.
                Ok(renewed) if renewed.get(i) == Some(&true) && !late => {
                    tenure.confirmed(sent_at, self.watchdog);
                    tenure.publish();
                    tally.renewed += 1;
                }
                Ok(renewed) if renewed.get(i) == Some(&true) => {
                    tracing::warn!(
                        lock,
                        owner,
                        "lock lost: renewal confirmed after its lease could have run out"
                    );
                    tally.lost += u64::from(tenure.lose(LostReason::NotRenewed));
                }
                Ok(_) if self.is_forcing(lock) => tenure.gone = true,
                Ok(_) => {
                    tracing::warn!(lock, owner, "lock lost: renewal found it gone");
                    tally.lost += u64::from(tenure.lose(LostReason::Gone));
                    gone.push((key.name.clone(), key.field.clone()));
                }
                Err(e) if late => {
                    tracing::warn!(lock, owner, error = %e, "lock lost: could not renew before its lease could have run out");
                    tally.lost += u64::from(tenure.lose(LostReason::NotRenewed));
                }
                Err(e) => {
                    tracing::debug!(lock, error = %e, "renewal failed, retrying soon");
                    tally.failed += 1;
                }
            }
        }
        for (name, field) in gone {
            end_tenure(&mut map, &name, &field);
        }
        drop(map);
        telemetry::renewals(tally.renewed, tally.failed);
        tally
    }
}

/// What one renewal batch did to its holds.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) renewed: u64,
    pub(crate) failed: u64,
    pub(crate) lost: u64,
}
