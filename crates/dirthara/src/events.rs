//! Events the engine emits while it works: the CLI renders them, applications may forward
//! them to their own logging.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::error::Code;
use crate::migration::Direction;

/// A warning: the run goes on, but someone should look.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Warning {
    /// The stable code, e.g. [`Code::OutOfOrder`] or [`Code::LockLeaseExpired`].
    #[serde(serialize_with = "serialize_code")]
    pub code: Code,
    /// What happened and what, if anything, to do about it.
    pub message: String,
}

fn serialize_code<S: serde::Serializer>(code: &Code, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(code.as_str())
}

impl Warning {
    pub(crate) fn out_of_order(versions: &[i64], newest_applied: i64) -> Self {
        let list: Vec<String> = versions.iter().map(i64::to_string).collect();
        Warning {
            code: Code::OutOfOrder,
            message: format!(
                "pending migration(s) {} are older than the newest applied migration {newest_applied} \
                 (merged from another branch?); applying them anyway (--strict refuses instead)",
                list.join(", ")
            ),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "warning [{}]: {}", self.code, self.message)
    }
}

/// Who holds a lock, as far as the database can tell.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct LockHolder {
    /// The database's identifier of the holding session (PostgreSQL backend pid, MySQL connection id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<i64>,
    /// `dirthara <operation> <host>:<pid>` when the holder announced itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// The address the holding session connected from (session locks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_address: Option<String>,
    /// When the holding session started (UTC, RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// What the holder is doing, where the database can tell (MySQL: its statement and for how long).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity: Option<String>,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(app) = &self.application {
            parts.push(format!("`{app}`"));
        }
        if let Some(id) = self.session_id {
            parts.push(format!("session {id}"));
        }
        if let Some(addr) = &self.client_address {
            parts.push(format!("from {addr}"));
        }
        if let Some(since) = &self.since {
            parts.push(format!("since {since}"));
        }
        if let Some(activity) = &self.activity {
            parts.push(activity.clone());
        }
        if parts.is_empty() {
            f.write_str("an unidentified session")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A session that holds a lock a migration's statement waits for, as the database reports it
/// (PostgreSQL `pg_blocking_pids` and `pg_stat_activity`; MySQL/MariaDB the metadata-lock
/// holder, or — where the server does not expose metadata locks — the oldest open
/// transaction in the database, flagged as likely).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct Blocker {
    /// The session's id (PostgreSQL backend pid, MySQL connection id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<i64>,
    /// Its `application_name` (PostgreSQL) or user (MySQL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// Where it connected from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_address: Option<String>,
    /// What it is doing: `idle in transaction`, `active`, `Sleep`, `Query`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// How long its transaction has been open (`transaction_age_ms` in JSON).
    #[serde(
        rename = "transaction_age_ms",
        serialize_with = "serialize_opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub transaction_age: Option<Duration>,
    /// The start of its current (or last) statement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The database could not say which session holds the lock; this is the session most
    /// likely to (MariaDB, and MySQL without `performance_schema`: the oldest transaction
    /// open since before the statement began to wait).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub likely: bool,
    /// Which of its transactions held the lock (when it started, in the database's words):
    /// while the engine pauses before the next attempt, it asks whether this transaction
    /// is still open, and tries again at once when it is not.
    #[serde(skip)]
    pub(crate) transaction: Option<String>,
}

fn serialize_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.session_id {
            Some(id) => write!(f, "session {id}")?,
            None => f.write_str("a session")?,
        }
        let mut facts = Vec::new();
        if let Some(application) = self.application.as_deref().filter(|a| !a.is_empty()) {
            facts.push(format!("`{application}`"));
        }
        if let Some(address) = &self.client_address {
            facts.push(format!("from {address}"));
        }
        if let Some(state) = &self.state {
            facts.push(state.clone());
        }
        if let Some(age) = self.transaction_age {
            facts.push(format!(
                "transaction open for {}",
                crate::format_duration(age)
            ));
        }
        if !facts.is_empty() {
            write!(f, " ({})", facts.join(", "))?;
        }
        if let Some(query) = &self.query {
            let query = query.split_whitespace().collect::<Vec<_>>().join(" ");
            write!(f, ": `{}`", crate::text::cut_at_char_boundary(&query, 120))?;
        }
        if self.likely {
            f.write_str(
                " — most likely: the server does not report who holds metadata locks, and this \
                 is the oldest transaction open since before the statement began to wait",
            )?;
        }
        Ok(())
    }
}

/// Something that happened during a command, when it happened, and on which target.
///
/// In JSON (`--output ndjson`) the facts of [`EventKind`] sit beside `at` and `target`:
/// `{"at":"2026-12-01T20:28:27.123456Z","event":"lock_acquired","lock":...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Event {
    /// When it happened (`at` in JSON: RFC 3339, UTC, microseconds).
    #[serde(serialize_with = "serialize_at")]
    pub at: SystemTime,
    /// The fleet target it happened on ([`EventSink::for_target`]); `None` outside a fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

fn serialize_at<S: serde::Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::format::format_timestamp(*at))
}

/// What happened, with its facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// Still trying to reach a database that is not up yet.
    ConnectionWaiting {
        /// The named connection being opened.
        connection: String,
        /// Its URL, without the password (`url`: in a fleet, the event's `target` is the
        /// target's name).
        url: String,
        /// Why the last attempt failed, in the driver's words.
        reason: String,
    },
    /// `locking = true` chose another lock than the database's usual one, because the
    /// server cannot be trusted with it (CockroachDB behind a `postgres://` URL takes the
    /// lease, not the session lock).
    LockChosen {
        /// The history connection, where the lock is taken.
        connection: String,
        /// The lock taken instead.
        strategy: crate::report::LockStrategy,
        /// Why, and how to say so explicitly.
        reason: String,
    },
    /// The command runs without a lock, as configured.
    Unlocked {
        /// The history connection, which a lock would have been taken on.
        connection: String,
    },
    /// Another runner holds the lock; we wait for it.
    LockWaiting {
        /// The lock's name, `dirthara:migrations`.
        lock: String,
        /// The history connection, where the lock is taken.
        connection: String,
        /// Who holds it; `None` when the database could not tell.
        holder: Option<LockHolder>,
        /// How long we have waited so far (`waited_ms` in JSON).
        #[serde(rename = "waited_ms", serialize_with = "serialize_ms")]
        waited: Duration,
    },
    /// The lock is ours until the command ends.
    LockAcquired {
        /// The lock's name, `dirthara:migrations`.
        lock: String,
        /// The history connection, where the lock is taken.
        connection: String,
        /// How long it took to get, waiting included (`waited_ms` in JSON).
        #[serde(rename = "waited_ms", serialize_with = "serialize_ms")]
        waited: Duration,
    },
    /// The lock was released at the end of the command.
    LockReleased {
        /// The lock's name, `dirthara:migrations`.
        lock: String,
        /// The history connection, where the lock was taken.
        connection: String,
    },
    /// The plan is made: this many steps will run.
    Planned {
        /// The command's name: `migrate`, `rollback`, `to`, `refresh` or `fresh`.
        operation: String,
        /// How many steps the plan has, up and down together.
        steps: usize,
        /// The history's digest matched the files, so its records were not read: every
        /// migration is applied, unchanged, and none is missing or dirty.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        by_digest: bool,
    },
    /// `fresh` dropped these tables.
    Dropped {
        /// The history connection, whose database was emptied.
        connection: String,
        /// The names of the dropped tables or collections.
        objects: Vec<String>,
    },
    /// A migration's step is about to run.
    MigrationStarted {
        /// The migration's version.
        version: i64,
        /// The migration's name.
        name: String,
        /// Whether its up or its down step runs.
        direction: Direction,
        /// The named connection the step runs on.
        connection: String,
    },
    /// A statement of a migration's step gave way to the application: it waited
    /// `table_lock_timeout` for a table (or metadata) lock and was undone; the step is tried
    /// again after `retry_in`.
    TableLockTimeout {
        /// The migration's version.
        version: i64,
        /// The migration's name.
        name: String,
        /// Whether its up or its down step waited.
        direction: Direction,
        /// The attempt that gave way (1 for the first).
        attempt: u32,
        /// How long its statement could wait for the lock: the timeout as the database
        /// applied it (`waited_ms` in JSON).
        #[serde(rename = "waited_ms", serialize_with = "serialize_ms")]
        waited: Duration,
        /// The timeout asked for, where the database could only bound the wait in coarser
        /// units and rounded it up (MySQL counts whole seconds: 500 ms waits 1 s);
        /// `rounded_from_ms` in JSON.
        #[serde(
            rename = "rounded_from_ms",
            serialize_with = "serialize_opt_ms",
            skip_serializing_if = "Option::is_none"
        )]
        rounded_from: Option<Duration>,
        /// The table it waited for, where the database said.
        #[serde(skip_serializing_if = "Option::is_none")]
        table: Option<String>,
        /// Who held the lock, where the database could tell.
        #[serde(skip_serializing_if = "Option::is_none")]
        blocker: Option<Blocker>,
        /// The pause before the next attempt (`retry_in_ms` in JSON).
        #[serde(rename = "retry_in_ms", serialize_with = "serialize_ms")]
        retry_in: Duration,
        /// What is left of `table_lock_retry_for` (`budget_left_ms` in JSON).
        #[serde(rename = "budget_left_ms", serialize_with = "serialize_ms")]
        budget_left: Duration,
    },
    /// While the step paused after giving way, the session that held its lock ended its
    /// transaction: the step is tried again at once instead of at the end of the pause,
    /// waiting at most `wait` (what keeps the application blocked under a quarter of the
    /// time, should another session hold the lock now).
    TableLockFreed {
        /// The migration's version.
        version: i64,
        /// The migration's name.
        name: String,
        /// Whether its up or its down step is tried again.
        direction: Direction,
        /// The session that held the lock and is done with it.
        #[serde(skip_serializing_if = "Option::is_none")]
        blocker: Option<Blocker>,
        /// What was left of the pause (`pause_left_ms` in JSON).
        #[serde(rename = "pause_left_ms", serialize_with = "serialize_ms")]
        pause_left: Duration,
        /// The longest the next attempt waits for its lock (`wait_ms` in JSON).
        #[serde(rename = "wait_ms", serialize_with = "serialize_ms")]
        wait: Duration,
    },
    /// A migration's step succeeded.
    MigrationFinished {
        /// The migration's version.
        version: i64,
        /// The migration's name.
        name: String,
        /// Whether its up or its down step ran.
        direction: Direction,
        /// How long the step took (`duration_ms` in JSON).
        #[serde(rename = "duration_ms", serialize_with = "serialize_ms")]
        duration: Duration,
        /// An empty or comment-only down step: recorded, nothing sent.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        reverses_nothing: bool,
    },
    /// `wait`: the history does not hold every migration waited for yet (said every 10 s).
    HistoryWaiting {
        /// How many of them are applied.
        applied: usize,
        /// How many are waited for.
        wanted: usize,
        /// What it saw (pending migrations, a runner migrating, a database not reachable).
        seen: String,
        /// How long it has waited (`waited_ms` in JSON).
        #[serde(rename = "waited_ms", serialize_with = "serialize_ms")]
        waited: Duration,
    },
    /// A fleet run begins: this many targets, each under its own lock.
    FleetPlanned {
        /// The command: `migrate`, `status`, ...
        operation: String,
        /// The targets of this run (this runner's shard).
        targets: usize,
        /// Targets run at a time.
        jobs: usize,
    },
    /// A fleet's target starts (the event's `target` names it).
    TargetStarted {
        /// It is run again at the end, after its lock was found held the first time.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        deferred: bool,
    },
    /// A fleet's target was left for the end: another runner holds its lock.
    TargetDeferred {
        /// Who holds it, as far as the database can tell.
        #[serde(skip_serializing_if = "Option::is_none")]
        holder: Option<String>,
    },
    /// A fleet's target ended.
    TargetFinished {
        /// How it ended.
        outcome: crate::fleet::Outcome,
        /// Migrations applied there.
        applied: usize,
        /// Migrations reverted there.
        reverted: usize,
        /// The error's code, when it failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// How long it took (`duration_ms` in JSON).
        #[serde(rename = "duration_ms", serialize_with = "serialize_ms")]
        duration: Duration,
    },
    /// Something someone should look at; the command goes on.
    Warning(Warning),
}

fn serialize_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Receives events as they happen. Cheap to clone; called from the task running the command.
#[derive(Clone)]
pub struct EventSink {
    receive: Arc<dyn Fn(&Event) + Send + Sync>,
    /// Written into every event this sink stamps: the fleet target it reports for.
    target: Option<Arc<str>>,
}

impl EventSink {
    /// A sink that calls `f` with each event. Keep `f` quick: the command waits for it.
    pub fn new(f: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        EventSink {
            receive: Arc::new(f),
            target: None,
        }
    }

    /// A sink that drops every event.
    pub fn discard() -> Self {
        EventSink::new(|_| {})
    }

    /// The same sink, naming `target` in every event it passes on (a fleet's targets each
    /// report through one of these).
    pub fn for_target(&self, target: &str) -> Self {
        EventSink {
            receive: Arc::clone(&self.receive),
            target: Some(Arc::from(target)),
        }
    }

    /// Stamps `kind` with the time and this sink's target, and passes it to the sink's
    /// function.
    pub fn emit(&self, kind: EventKind) {
        (self.receive)(&Event {
            at: SystemTime::now(),
            target: self.target.as_deref().map(str::to_string),
            kind,
        });
    }
}

#[cfg(feature = "tracing")]
impl EventSink {
    /// Forwards every event to [`tracing`] (target `dirthara`): lock waits and warnings at
    /// `WARN`, the rest at `INFO`, with the facts as fields. Commands and migrations also
    /// run inside the spans `dirthara.command` and `dirthara.migration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("sqlite:app.db"))
    ///     .with_events(dirthara::EventSink::tracing());
    /// ```
    pub fn tracing() -> Self {
        EventSink::new(trace_event)
    }
}

#[cfg(feature = "tracing")]
fn trace_event(event: &Event) {
    use tracing::{info, warn};
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
            error = error.as_deref().unwrap_or_default(),
            duration_ms = duration.as_millis() as u64,
            "target finished"
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
        EventKind::Warning(warning) => {
            warn!(target: "dirthara", code = %warning.code, "{}", warning.message)
        }
    }
}

impl Default for EventSink {
    fn default() -> Self {
        EventSink::discard()
    }
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventSink")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blockers_transaction_age_is_said_as_every_duration_is() {
        let blocker = Blocker {
            session_id: Some(4127),
            application: Some("report-job".into()),
            client_address: None,
            state: Some("idle in transaction".into()),
            transaction_age: Some(Duration::from_millis(3020)),
            query: None,
            likely: false,
            transaction: None,
        };
        assert_eq!(
            blocker.to_string(),
            "session 4127 (`report-job`, idle in transaction, transaction open for 3.02 s)"
        );
    }
}
