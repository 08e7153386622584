//! A step with a table-lock timeout, watched from a connection of our own: while a statement
//! waits for its table lock, the observer asks who holds it (afterwards the wait is over and
//! the database can no longer say); while the engine pauses before the next attempt, it asks
//! whether that session is done. Opened the first time a step has a timeout.

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
        if self.observer.is_none() {
            // Without it the step still runs; only the blocker goes unnamed.
            self.observer = self.driver.open_sibling().await.ok();
        }
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
                found = watch(observer.as_deref_mut(), &identity, delay) => {
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

/// After `delay`, asks `observer` who blocks the session `identity`.
async fn watch(
    observer: Option<&mut (dyn SqlDriver + 'static)>,
    identity: &str,
    delay: Duration,
) -> Option<(Option<String>, Blocker)> {
    tokio::time::sleep(delay).await;
    observer?.who_blocks(identity).await
}
