//! The `tracing` adapter: every event forwarded as a `tracing` event (target `dirthara`),
//! lock waits and warnings at `WARN`, the rest at `INFO`, with the facts as fields.

use super::{Event, EventKind, EventSink};
use crate::vocabulary::Code;

impl EventSink {
    /// Forwards every event to [`tracing`] (target `dirthara`): lock waits and warnings at
    /// `WARN`, the rest at `INFO`, with the facts as fields. Commands and migrations also
    /// run inside the spans `dirthara.command` and `dirthara.migration`.
    ///
    /// # Examples
    ///
    /// ```
    /// // Given to `dirthara_core::Migrator::with_events`:
    /// let events = dirthara_core::events::EventSink::tracing();
    /// ```
    pub fn tracing() -> Self {
        EventSink::new(trace_event)
    }
}
fn trace_event(event: &Event) {
    match &event.kind {
        EventKind::ConnectionWaiting { .. }
        | EventKind::Unlocked { .. }
        | EventKind::LockChosen { .. }
        | EventKind::LockWaiting { .. }
        | EventKind::LockAcquired { .. }
        | EventKind::LockReleased { .. } => trace_lock_event(event),
        EventKind::FleetPlanned { .. }
        | EventKind::TargetStarted { .. }
        | EventKind::TargetDeferred { .. }
        | EventKind::TargetFinished { .. } => trace_fleet_event(event),
        EventKind::Warning(warning) => {
            ::tracing::warn!(target: "dirthara", code = %warning.code, "{}", warning.message)
        }
        _ => trace_migration_event(event),
    }
}

/// Connecting and the migration lock.
fn trace_lock_event(event: &Event) {
    use ::tracing::{info, warn};
    match &event.kind {
        EventKind::ConnectionWaiting {
            connection,
            url,
            reason,
        } => warn!(target: "dirthara", %connection, %url, %reason, "waiting for the database"),
        EventKind::Unlocked { connection } => {
            warn!(target: "dirthara", %connection, "running without the migration lock")
        }
        EventKind::LockChosen {
            connection,
            strategy,
            reason,
        } => info!(target: "dirthara", %connection, %strategy, "{reason}"),
        EventKind::LockWaiting {
            lock,
            connection,
            holder,
            waited,
        } => warn!(
            target: "dirthara",
            %lock,
            %connection,
            holder = %holder.as_ref().map(ToString::to_string).unwrap_or_default(),
            waited_ms = waited.as_millis() as u64,
            "waiting for the migration lock"
        ),
        EventKind::LockAcquired {
            lock,
            connection,
            waited,
        } => {
            info!(target: "dirthara", %lock, %connection, waited_ms = waited.as_millis() as u64, "lock acquired")
        }
        EventKind::LockReleased { lock, connection } => {
            info!(target: "dirthara", %lock, %connection, "lock released")
        }
        _ => unreachable!("trace_lock_event is given its own events only"),
    }
}

/// The plan, each migration, and its giving way to the application's locks.
fn trace_migration_event(event: &Event) {
    use ::tracing::{info, warn};
    match &event.kind {
        EventKind::Planned {
            operation,
            steps,
            by_digest,
        } => {
            info!(target: "dirthara", %operation, steps, by_digest, "planned")
        }
        EventKind::Dropped {
            connection,
            objects,
        } => info!(target: "dirthara", %connection, dropped = objects.len(), "dropped every table"),
        EventKind::MigrationStarted {
            version,
            name,
            direction,
            connection,
        } => {
            info!(target: "dirthara", version, %name, %direction, %connection, "migration started")
        }
        EventKind::MigrationFinished {
            version,
            name,
            direction,
            duration,
            ..
        } => info!(
            target: "dirthara",
            version,
            %name,
            %direction,
            duration_ms = duration.as_millis() as u64,
            "migration finished"
        ),
        EventKind::TableLockTimeout {
            version,
            attempt,
            table,
            blocker,
            retry_in,
            ..
        } => warn!(
            target: "dirthara",
            version,
            attempt,
            table = table.as_deref().unwrap_or(""),
            blocker = %blocker.as_ref().map(ToString::to_string).unwrap_or_default(),
            retry_in_ms = retry_in.as_millis() as u64,
            "a statement gave way to the application's table lock; retrying"
        ),
        EventKind::WaitStarted {
            version,
            name,
            others,
            url,
            timeout,
        } => info!(
            target: "dirthara",
            version,
            %name,
            others,
            %url,
            timeout_ms = timeout.map(|t| t.as_millis() as u64),
            "waiting for the history"
        ),
        EventKind::HistoryWaiting {
            applied,
            wanted,
            seen,
            waited,
        } => info!(
            target: "dirthara",
            applied,
            wanted,
            waited_ms = waited.as_millis() as u64,
            "waiting for the history: {seen}"
        ),
        EventKind::TableLockFreed {
            version,
            blocker,
            wait,
            ..
        } => info!(
            target: "dirthara",
            version,
            blocker = %blocker.as_ref().map(ToString::to_string).unwrap_or_default(),
            wait_ms = wait.as_millis() as u64,
            "the session holding the table lock is done; retrying now"
        ),
        _ => unreachable!("trace_migration_event is given its own events only"),
    }
}

/// A fleet and its targets.
fn trace_fleet_event(event: &Event) {
    use ::tracing::info;
    match &event.kind {
        EventKind::FleetPlanned {
            operation,
            targets,
            jobs,
        } => info!(target: "dirthara", %operation, targets, jobs, "fleet planned"),
        EventKind::TargetStarted { deferred } => info!(
            target: "dirthara",
            fleet_target = event.target.as_deref().unwrap_or_default(),
            deferred,
            "target started"
        ),
        EventKind::TargetDeferred { holder } => info!(
            target: "dirthara",
            fleet_target = event.target.as_deref().unwrap_or_default(),
            holder = holder.as_deref().unwrap_or_default(),
            "target's lock held: left for the end"
        ),
        EventKind::TargetFinished {
            outcome,
            applied,
            duration,
            error,
            ..
        } => info!(
            target: "dirthara",
            fleet_target = event.target.as_deref().unwrap_or_default(),
            %outcome,
            applied,
            error = error.map(Code::as_str).unwrap_or_default(),
            duration_ms = duration.as_millis() as u64,
            "target finished"
        ),
        _ => unreachable!("trace_fleet_event is given its own events only"),
    }
}
