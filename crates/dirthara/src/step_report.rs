//! What happened to one step: part of every run report, and of an error's completed steps.
//! A module of its own, importing only `migration`, so that `error` (which lists the steps
//! completed before a failure) does not depend on `report`, which depends on `error`.

use serde::Serialize;

use crate::migration::Direction;

/// One step that ran and was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StepReport {
    pub version: i64,
    pub name: String,
    pub direction: Direction,
    pub connection: String,
    pub duration_ms: u64,
    /// A down step that is empty or only comments: recorded as reversed, nothing was sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reverses_nothing: bool,
}
