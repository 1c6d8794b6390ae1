//! The background service itself: its counted tasks, and the give-backs of
//! permits among them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::engine::background::pending::PendingReleases;

/// The background service of one client: its tasks, counted so that a
/// shutdown can wait for them to end, and the give-backs of permits among
/// them.
#[derive(Clone)]
pub(crate) struct Background {
    runtime: Handle,
    running: Arc<watch::Sender<usize>>,
    /// The give-backs of permits among the tasks, which keep trying until
    /// they land and which a shutdown abandons after waiting.
    pub(crate) releases: Arc<PendingReleases>,
}

impl Background {
    pub(crate) fn new(runtime: Handle) -> Background {
        Background {
            runtime,
            running: Arc::new(watch::Sender::new(0)),
            releases: PendingReleases::new(),
        }
    }

    /// Run `fut` in the background. Safe to call outside the runtime; if it
    /// has shut down, `fut` is dropped and the server-side TTL bounds what
    /// is left behind.
    pub(crate) fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.running.send_modify(|n| *n += 1);
        let done = Finished(self.running.clone());
        drop(self.runtime.spawn(async move {
            let _done = done;
            fut.await;
        }));
    }

    /// Wait until no task runs.
    pub(crate) async fn drained(&self) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// At shutdown: let the tasks under way finish for at most `wait`, then
    /// abandon the give-backs of permits that still could not reach Redis
    /// (reported: [`PendingReleases::abandon_all`]).
    pub(crate) async fn shut_down(&self, wait: Duration) {
        let _ = tokio::time::timeout(wait, self.drained()).await;
        self.releases.abandon_all();
    }
}

/// Counts a task as ended when dropped, however it ends.
struct Finished(Arc<watch::Sender<usize>>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}
