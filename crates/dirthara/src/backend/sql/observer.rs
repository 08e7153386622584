//! A step with a table-lock timeout, watched from a connection of our own: while a statement
//! waits for its table lock, the observer asks who holds it (afterwards the wait is over and
//! the database can no longer say); while the engine pauses before the next attempt, it asks
//! whether that session is done. Opened the first time a statement has waited for its lock
//! long enough to be asked about, and kept: a step that is merely quick never opens it, so a
//! run (or a fleet's job) uses one connection, and two only while something blocks it.

use std::time::Duration;

use super::{SqlBackend, SqlDriver};
use crate::backend::{Step, StepFailure};
use crate::events::Blocker;

impl<D: SqlDriver> SqlBackend<D> {
    /// Runs `step`, whose statements wait at most `timeout` for their table locks, naming
    /// the blocker in the failure of a statement that gave way.
    pub(super) async fn run_observed(
        &mut self,
        step: Step<'_>,
        timeout: Duration,
    ) -> Result<(), StepFailure> {
        // Made now, while `self` is free; opened only if the step waits long enough.
        let opening = self.observer.is_none().then(|| self.driver.open_sibling());
        let mut observer = self.observer.take();
        let identity = self.driver.session_identity();
        // Asked once the statement has waited most of its timeout: a step that is merely
        // slow costs nothing, and a blocked one is still waiting when asked.
        let delay = timeout.mul_f64(0.7).max(Duration::from_millis(20));
        let mut seen = None;
        let result = {
            let running = self.run_step(step);
            tokio::pin!(running);
            tokio::select! {
                result = &mut running => result,
                found = watch(&mut observer, opening, &identity, delay) => {
                    seen = found;
                    running.await
                }
            }
        };
        self.observer = observer;
        result.map_err(|mut failure| {
            if failure.error.lock_not_available {
                if let Some((table, blocker)) = seen {
                    failure.error.table = failure.error.table.take().or(table);
                    failure.error.blocker = Some(blocker);
                }
            }
            failure
        })
    }

    /// Whether the transaction `blocker` held the lock with has ended.
    pub(super) async fn observed_blocker_gone(&mut self, blocker: &Blocker) -> Option<bool> {
        self.observer.as_mut()?.blocker_gone(blocker).await
    }
}

/// After `delay`, asks `observer` (opened now if need be, from `opening`) who blocks the
/// session `identity`. Without an observer the step still runs; only the blocker goes
/// unnamed.
async fn watch(
    observer: &mut Option<Box<dyn SqlDriver>>,
    opening: Option<super::Sibling>,
    identity: &str,
    delay: Duration,
) -> Option<(Option<String>, Blocker)> {
    tokio::time::sleep(delay).await;
    if let Some(opening) = opening.filter(|_| observer.is_none()) {
        *observer = opening.await.ok();
    }
    observer.as_mut()?.who_blocks(identity).await
}
