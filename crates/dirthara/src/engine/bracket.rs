//! How a step's history records bracket it: decided from the plan and the history
//! connection's capabilities alone, so the run (`session.rs`) and `preview` agree.

use crate::kind::Capabilities;
use crate::plan::PlannedStep;

/// How a step's history records bracket it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bracket {
    /// A deliberate "reverses nothing": the record alone, nothing is sent.
    RecordOnly,
    /// The step and its record commit together or not at all.
    Atomic,
    /// The step cannot share a transaction with its record: a `running` marker first, so a
    /// crash inside it is seen by the next run instead of being re-run or skipped.
    Marked,
}

/// How the records of `step` bracket it, when the history connection is `history_connection`
/// and can do what `history` says: the run asks it of the connection, `preview` of the
/// connection's kind.
pub(super) fn bracket_of(
    step: &PlannedStep<'_>,
    history_connection: &str,
    history: &Capabilities,
) -> Bracket {
    if step.reverses_nothing() {
        Bracket::RecordOnly
    } else if step.transactional()
        && step.migration.connection == history_connection
        && history.transactional_ddl
    {
        Bracket::Atomic
    } else {
        Bracket::Marked
    }
}
