//! Events the engine emits while it works: the CLI renders them, applications may forward
//! them to their own logging.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

mod facts;
mod json;
#[cfg(feature = "tracing")]
mod tracing;

pub use facts::{Blocker, LockHolder, Warning};
use json::{serialize_at, serialize_ms, serialize_opt_code, serialize_opt_ms};

use crate::migration::Direction;
use crate::vocabulary::{Code, LockStrategy, Outcome};

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
        strategy: LockStrategy,
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
        /// It did not wait out the timeout: the database found it in a deadlock with the
        /// application and undid it (PostgreSQL `40P01`, MySQL 1213).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        deadlock: bool,
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
        /// A repeatable migration (`R__<name>`; `version` means nothing).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        repeatable: bool,
    },
    /// `wait` begins (before it connects): what it waits for, and where.
    WaitStarted {
        /// The migration waited for (`--until`), or the newest of the directories.
        version: i64,
        /// Its name.
        name: String,
        /// How many other migrations are waited for too: every other one of the
        /// directories for `latest`, none for `--until`.
        others: usize,
        /// The history connection's URL, without the password.
        url: String,
        /// When it gives up (`timeout_ms` in JSON: `null` when it waits for ever).
        #[serde(rename = "timeout_ms", serialize_with = "serialize_opt_ms")]
        timeout: Option<Duration>,
    },
    /// `wait`: the history does not hold every migration waited for yet. Said after the
    /// first look that finds it so, then every 5 s (also while a look hangs on a database
    /// that does not answer).
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
        outcome: Outcome,
        /// Migrations applied there.
        applied: usize,
        /// Migrations reverted there.
        reverted: usize,
        /// The error's code, when it failed.
        #[serde(
            serialize_with = "serialize_opt_code",
            skip_serializing_if = "Option::is_none"
        )]
        error: Option<Code>,
        /// How long it took (`duration_ms` in JSON).
        #[serde(rename = "duration_ms", serialize_with = "serialize_ms")]
        duration: Duration,
    },
    /// Something someone should look at; the command goes on.
    Warning(Warning),
}

/// Receives events as they happen. Cheap to clone; called from the task running the command.
#[derive(Clone)]
pub struct EventSink {
    receive: Arc<dyn Fn(&Event) + Send + Sync>,
    /// Written into every event this sink stamps: the fleet target it reports for.
    target: Option<Arc<str>>,
}

impl EventKind {
    /// What a [`EventKind::TableLockTimeout`] says, as its warning's message (the same in
    /// human output, on stderr while the run goes on, and in the `--output json` report's
    /// `warnings`); `None` for any other event.
    pub fn gave_way_message(&self) -> Option<String> {
        let EventKind::TableLockTimeout {
            version,
            name,
            direction,
            attempt,
            waited,
            rounded_from,
            table,
            blocker,
            deadlock,
            retry_in,
            budget_left,
        } = self
        else {
            return None;
        };
        let table = table
            .as_deref()
            .map_or("its table".into(), |t| format!("`{t}`"));
        let holder = blocker
            .as_ref()
            .map_or_else(|| "another session".to_string(), |b| b.to_string());
        let rounded = rounded_from.map_or_else(String::new, |asked| {
            format!(
                " (the {} asked for, rounded up: the database counts whole seconds)",
                crate::format_duration(asked)
            )
        });
        let gave_way = match deadlock {
            true => "was undone by the database to break a deadlock with the application".into(),
            false => format!(
                "gave way to the application after waiting {}{rounded}",
                crate::format_duration(*waited)
            ),
        };
        Some(format!(
            "migration {version} ({name}) {direction}, attempt {attempt}, {gave_way}: {table} is \
             locked by {holder}; trying again in {}, {} of the retry budget left",
            crate::format_duration(*retry_in),
            crate::format_duration(*budget_left)
        ))
    }
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

    /// Passes on, as it is, an event another sink already stamped (a sink that records
    /// events before forwarding them to this one).
    pub fn pass_on(&self, event: &Event) {
        (self.receive)(event)
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
