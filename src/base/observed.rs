//! A small value one owner changes and others observe (a hold's or a
//! permit's status): what `tokio::sync::watch` gives, for one cheap `Copy`
//! value. A watch channel keeps nine wake-up lists and wakes eight of them
//! at every change and when it closes; this keeps one, which costs a
//! fraction of that on every acquisition, where each tenure makes one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The owner's side: changes the value; dropping it ends it (its observers
/// are woken and see [`Observer::ended`]).
pub(crate) struct Observed<T: Copy>(Arc<ObservedCell<T>>);

/// An observer's side: reads the value and waits for a change. Cheap to
/// clone.
#[derive(Clone)]
pub(crate) struct Observer<T: Copy>(Arc<ObservedCell<T>>);

struct ObservedCell<T> {
    value: Mutex<T>,
    /// Set when the owner's side is dropped, after its last change.
    ended: AtomicBool,
    /// Woken at every change and at the end.
    changed: Notify,
}

impl<T: Copy> Observed<T> {
    pub(crate) fn new(value: T) -> Observed<T> {
        Observed(Arc::new(ObservedCell {
            value: Mutex::new(value),
            ended: AtomicBool::new(false),
            changed: Notify::new(),
        }))
    }

    /// The value now.
    pub(crate) fn get(&self) -> T {
        *self.0.value.lock()
    }

    /// A new observer of this value.
    pub(crate) fn observe(&self) -> Observer<T> {
        Observer(self.0.clone())
    }

    /// Whether `observer` observes this value (not an earlier one).
    pub(crate) fn is_observed_by(&self, observer: &Observer<T>) -> bool {
        Arc::ptr_eq(&self.0, &observer.0)
    }

    /// Change the value; observers are woken if `change` says it changed.
    pub(crate) fn modify_if(&self, change: impl FnOnce(&mut T) -> bool) {
        let changed = change(&mut self.0.value.lock());
        if changed {
            self.0.changed.notify_waiters();
        }
    }

    /// Change the value and wake the observers.
    pub(crate) fn modify(&self, change: impl FnOnce(&mut T)) {
        self.modify_if(|value| {
            change(value);
            true
        });
    }
}

impl<T: Copy> Drop for Observed<T> {
    fn drop(&mut self) {
        self.0.ended.store(true, Ordering::Release);
        self.0.changed.notify_waiters();
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for Observed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Observed").field(&self.get()).finish()
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for Observer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Observer").field(&self.get()).finish()
    }
}

impl<T: Copy> Observer<T> {
    /// The value now.
    pub(crate) fn get(&self) -> T {
        *self.0.value.lock()
    }

    /// Whether the owner's side is gone. Read it before [`get`](Self::get):
    /// once it is true, the value read after it is the last one.
    pub(crate) fn ended(&self) -> bool {
        self.0.ended.load(Ordering::Acquire)
    }

    /// The next change or the end: `enable` it before reading the value,
    /// so that a change in between is not missed.
    pub(crate) fn changed(&self) -> Notified<'_> {
        self.0.changed.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn observers_see_every_change_and_the_end() {
        let owner = Observed::new(1u32);
        let observer = owner.observe();
        assert!(owner.is_observed_by(&observer));
        assert!(!Observed::new(1u32).is_observed_by(&observer));
        let woken = observer.changed();
        tokio::pin!(woken);
        woken.as_mut().enable();
        owner.modify_if(|v| {
            *v = 2;
            false // not announced: nobody is woken
        });
        assert_eq!(observer.get(), 2);
        assert!(futures::FutureExt::now_or_never(woken.as_mut()).is_none());
        owner.modify(|v| *v = 3);
        woken.await;
        assert_eq!(observer.get(), 3);
        let end = observer.changed();
        tokio::pin!(end);
        end.as_mut().enable();
        drop(owner);
        end.await;
        assert!(observer.ended());
        assert_eq!(observer.get(), 3);
    }
}
