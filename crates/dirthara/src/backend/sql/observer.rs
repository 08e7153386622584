//! A step with a table-lock timeout, watched from a connection of our own: while a statement
//! waits for its table lock, the observer asks who holds it (afterwards the wait is over and
//! the database can no longer say); while the engine pauses before the next attempt, it asks
//! whether that session is done. Opened the first time a step has run long enough to be asked
//! about, and kept: a step that is merely quick never opens it, so a run (or a fleet's job)
//! uses one connection, and two only while something blocks or slows a step.
//!
//! It asks again and again while the step runs, a little more often than the timeout: a step
//! of several statements may wait for its lock at any of them, and every wait that gives way
//! lasts a whole timeout, so the last blocker named before a statement gives way was named
//! while that statement waited.

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
        // Asked once a statement may have waited most of its timeout, and as often again: a
        // step that is merely quick costs nothing, and a blocked statement is still waiting
        // when asked at least once.
        let every = timeout.mul_f64(0.7).max(Duration::from_millis(20));
        let mut seen = None;
        let result = {
            let running = self.run_step(step);
            let watching = watch(&mut observer, opening, &identity, every, &mut seen);
            tokio::select! {
                result = running => result,
                never = watching => match never {},
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

/// Every `every`, asks `observer` (opened the first time, from `opening`) who blocks the
/// session `identity`, keeping the latest blocker named in `seen`, until the step ends (this future
/// is then dropped). Without an observer the step still runs; only the blocker goes unnamed.
async fn watch<E: super::DriverError>(
    observer: &mut Option<Box<dyn SqlDriver<Error = E>>>,
    mut opening: Option<super::Sibling<E>>,
    identity: &str,
    every: Duration,
    seen: &mut Option<(Option<String>, Blocker)>,
) -> std::convert::Infallible {
    loop {
        tokio::time::sleep(every).await;
        if observer.is_none() {
            if let Some(opening) = opening.take() {
                *observer = opening.await.ok();
            }
        }
        let Some(observer) = observer.as_mut() else {
            return std::future::pending().await;
        };
        // Only an answer that names someone replaces the last: one asked just after the
        // statement gave way (while the step cleans up) finds nobody waiting.
        if let Some(found) = observer.who_blocks(identity).await {
            *seen = Some(found);
        }
    }
}
