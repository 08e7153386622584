//! What happened to one step: part of every run report, and of an error's completed steps.
//! A module of its own, importing only `migration`, so that `error` (which lists the steps
//! completed before a failure) does not depend on `report`, which depends on `error`.

use serde::Serialize;

use crate::migration::Direction;

/// One step that ran and was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StepReport {
    /// The migration's version.
    pub version: i64,
    /// The migration's name.
    pub name: String,
    /// `up` for a step applied (or recorded as applied), `down` for one reversed (or recorded
    /// as rolled back).
    pub direction: Direction,
    /// The named connection the step ran on (the history connection for a record written
    /// without a step).
    pub connection: String,
    /// How long the step took, in milliseconds; 0 for a record written without a step.
    pub duration_ms: u64,
    /// A down step that is empty or only comments: recorded as reversed, nothing was sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reverses_nothing: bool,
    /// A repeatable migration (`R__<name>`), applied again because its text changed; its
    /// `version` means nothing (0).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repeatable: bool,
}

impl StepReport {
    /// A step of `version` run (or recorded) in `direction` on `connection`, in no time, until
    /// its duration is set.
    pub fn new(
        version: i64,
        name: impl Into<String>,
        direction: Direction,
        connection: impl Into<String>,
    ) -> Self {
        StepReport {
            version,
            name: name.into(),
            direction,
            connection: connection.into(),
            duration_ms: 0,
            reverses_nothing: false,
            repeatable: false,
        }
    }
}
