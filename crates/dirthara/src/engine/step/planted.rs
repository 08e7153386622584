//! The planted faults of a step's records (tests only: the `failpoints` feature, see
//! `crate::failpoints`). Either one runs the step first, with no `running` marker before it,
//! and writes its `applied` record afterwards in a transaction of its own:
//! - `record_after_step`, for a step that would commit together with its record;
//! - `no_running_marker`, for a step that would be bracketed by a marker.
//!
//! A runner that dies between the two leaves the step's effect without its record.

use std::time::Duration;

use super::{Attempt, Prepared};
use crate::backend::Step;
use crate::engine::bracket::Bracket;
use crate::engine::session::Session;
use crate::error::Result;
use crate::lock::LockCheck;
use crate::migration::Direction;
use dirthara_core::planted_pause;

/// The pause between the step and its record, when a fault that applies to `prepared` is
/// switched on (steps up only).
pub(super) fn record_after(prepared: &Prepared<'_>) -> Option<Duration> {
    if prepared.direction != Direction::Up {
        return None;
    }
    match prepared.bracket {
        Bracket::Atomic => planted_pause("record_after_step"),
        Bracket::Marked => planted_pause("no_running_marker"),
        Bracket::RecordOnly => None,
    }
}

impl Session<'_> {
    /// The step, committed alone; then, after `pause`, its `applied` record.
    pub(super) async fn run_then_record(
        &mut self,
        prepared: &Prepared<'_>,
        check: LockCheck,
        pause: Duration,
    ) -> Result<()> {
        // What a marker would have carried, and the lock check the record would have carried:
        // this fault drops only the records' bracket.
        self.record_unrecorded().await?;
        if check != LockCheck::Before {
            self.ensure_lock(Some(prepared.migration)).await?;
        }
        let step = Step {
            body: prepared.body(),
            transactional: prepared.transactional || prepared.bracket == Bracket::Atomic,
            record: None,
            checks_lock: false,
            lock_timeout: None,
            resume_at: 0,
        };
        let target = self.step_connection(prepared).await?;
        if let Err(failure) = target.run(step).await {
            return Err(prepared.error(Attempt::Failed(failure), false));
        }
        tokio::time::sleep(pause).await;
        let record = prepared.completion.measured(prepared.started.elapsed());
        self.history.record(&[record]).await?;
        self.completed_step(prepared.report());
        Ok(())
    }
}
