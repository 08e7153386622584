//! dirthara: database schema migrations that stay correct when two runners collide.
//!
//! # Layout
//!
//! Three crates, each building on the one before; Cargo forbids the reverse, so the layering
//! holds by construction:
//!
//! - `dirthara-source` — the file formats (names, layouts, directives, JSON commands,
//!   checksums) and the SQL tokenizer, shared with `embed_migrations!`. No database.
//! - `dirthara-core` — everything that needs no driver: the planner (`plan`, with the
//!   table-lock retry policy in `plan/retry.rs`), the history's records and digest, the kind
//!   table (`kind.rs`: every fact about each kind of database), the lock algorithm (`lock`:
//!   strategy, one wait loop, the held lock as a value, the lease over a small store trait),
//!   errors, events, reports and the settings (`config`, one table of them in
//!   `config/settings.rs`).
//! - `dirthara` (this crate) — the engine and one module per database:
//!   - `engine`: [`Migrator`], the one place that decides when to load, lock, read, plan,
//!     apply and release: the commands (`engine/commands.rs`), each run as a session
//!     (`engine/session.rs`: connect, lock, the one apply loop, release) whose steps run in
//!     `engine/step.rs`, giving way to the application's table locks in
//!     `engine/attempts.rs`; `engine/preview.rs` and `engine/inspect.rs` only look;
//!     `engine/load.rs` loads the files, and `engine/placeholders.rs` fills in their
//!     placeholders, per command and per fleet target, before the lock.
//!   - `backend`: one module per database behind one narrow `Backend` trait (read and
//!     prepare the history, run a step with or without its record, record, drop, the lock
//!     primitives). The SQL backends share `backend/sql.rs` over a small driver trait
//!     (`sql/driver.rs`) generic over its error (`sql/error.rs`), with their statements in
//!     `sql/dialect/`; `backend/reading.rs` reads each step as its database will run it;
//!     the history's existence and layout rules are written once in
//!     `backend/history_tables.rs`.
//!   - `fleet`: one command over many targets (`fleet/run.rs` the schedule, `fleet/targets.rs`
//!     where targets come from).
//!   - `adopt`: reading other tools' history tables; `rust_migration`: migrations written in
//!     Rust.
//!
//! Within each crate the modules import each other without cycles (`bench/module_cycles.py`
//! checks both in CI): backends never import the engine, only the engine calls a backend's
//! step and lock methods.
//!
//! # Quick start
//!
//! ```no_run
//! # async fn run() -> Result<(), dirthara::Error> {
//! use dirthara::{Config, Migrator};
//!
//! let config = Config::with_url("postgres://app@localhost/app"); // reads ./migrations
//! let report = Migrator::new(config).migrate().await?;
//! for step in &report.applied {
//!     println!("{} {} ({} ms)", step.version, step.name, step.duration_ms);
//! }
//! # Ok(()) }
//! ```
//!
//! # The lock
//!
//! Every command that changes the database takes the lock `dirthara:migrations` on the
//! history connection before it reads the history, and releases it when it ends, whatever
//! the outcome; a failure to release is attached to the command's own error, never put in
//! its place. [`Config::locking`] chooses the strategy:
//!
//! - **Session lock** (`true` on PostgreSQL and MySQL/MariaDB): a named lock held by the
//!   history connection's session. A second runner waits (forever by default,
//!   [`Config::lock_wait`] bounds it) and then finds nothing left to do; if a process dies,
//!   the server releases its lock with its session. Waiters retry a non-blocking try-lock
//!   (PostgreSQL wakes them with `NOTIFY`), so none sits in a lock statement holding a
//!   snapshot. Before each migration the runner confirms it still holds the lock (on
//!   PostgreSQL inside the step's own transaction). *Limits:* poolers in transaction mode
//!   (PgBouncer) hand sessions around and break it; MySQL Galera keeps named locks per node;
//!   MySQL keeps a killed runner's lock until its running statement ends.
//! - **Lease** (`"lease"`, and `true` on MongoDB): a row/document with an expiry, taken in one
//!   atomic operation judged by the database's clock. A second runner fails at once with
//!   `MIGRATION_LOCK_HELD` (or retries until `lock_wait`); a crashed runner's lease lapses by
//!   itself after [`Config::lock_ttl`]; a heartbeat renews it and each migration first
//!   confirms it is still ours, else `LOCK_LEASE_LOST`; release deletes it only if it is still
//!   ours (else warning `LOCK_LEASE_EXPIRED`); a lease without a valid expiry is held, never
//!   stolen. *Limits:* a migration that outlives the lease without renewal can be overtaken
//!   (on SQLite, renewal happens only between migrations).
//! - **Off** (`false`): no protection; SQLite with `true` refuses to run at all rather than
//!   run unlocked without saying so.

#![warn(missing_docs)]

// The conformance checks (`tests/conformance/checks.rs`) name the library `dirthara`; the
// crate's own tests compile them too, against the in-memory backend.
#[cfg(test)]
extern crate self as dirthara;

/// Configuration: [`Config`] and the types and bounds of its settings (the fleet's are in
/// [`fleet`]).
pub mod config {
    pub use dirthara_core::config::{
        parse_duration, Config, Layout, LockWait, Locking, MAX_LOCK_TTL, MAX_WAIT, MIN_LOCK_TTL,
    };
}

/// What the `dirthara` command line needs beyond the embedding API, in one place: the table
/// of settings its flags are made from (each row's names, parser, default and help line),
/// the typed parsers of the settings a flag of its own reads, how the environment is read
/// (which variables are settings, which are typos of one), and the configuration files'
/// size cap. An application embedding the library does not need it.
pub mod cli_support {
    pub use dirthara_core::blocking::human_bytes;
    pub use dirthara_core::config::{
        check_jobs, check_placeholder_name, is_setting_variable, read_config_file,
        unknown_variables, FileForm, Origin, Setting, SettingRow, UnknownVariable,
        MAX_CONFIG_FILE_BYTES, SETTINGS, WAIT_TIMEOUT,
    };
}

// The layers below, from dirthara-core, under the names the modules here use.
use dirthara_core::{
    backoff, blocking, error, events, format, history, kind, lock, migration, plan, redact, report,
    schema, vocabulary,
};

mod adopt;
mod backend;
mod engine;
pub mod fleet;
mod rust_migration;
mod source;
#[cfg(feature = "otel")]
mod telemetry;

/// Compiles the migrations of a directory into the binary, validated at compile time.
///
/// The directory is relative to the crate's `Cargo.toml` (default `migrations`). It expands
/// to a `Vec<Migration>` for [`Migrator::with_migrations`]; clear
/// [`Config::directories`] so they are not loaded a second time from disk. A bad file name,
/// two migrations with one version, an unknown directive or an unreadable file is a compile
/// error naming the file. Editing a migration rebuilds the crate; to also notice files
/// *added* to the directory, add `println!("cargo:rerun-if-changed=migrations");` to a
/// build script.
///
/// A directory with two migrations of one version does not compile:
///
/// ```compile_fail
/// let migrations = dirthara::embed_migrations!("tests/embedded-bad");
/// ```
///
/// # Examples
///
/// ```ignore
/// let mut config = dirthara::Config::with_url(std::env::var("DATABASE_URL")?);
/// config.directories.clear();
/// dirthara::Migrator::new(config)
///     .with_migrations(dirthara::embed_migrations!("migrations"))
///     .migrate()
///     .await?;
/// ```
#[cfg(feature = "macros")]
pub use dirthara_macros::embed_migrations;

pub use adopt::{AdoptSource, AdoptedRecord, AdoptionReport, Tool};
pub use config::{Config, Layout, LockWait, Locking, MIN_LOCK_TTL};
pub use dirthara_core::blocking::{StepFinding, UnreadStatement};
#[cfg(feature = "failpoints")]
pub use dirthara_core::planted_faults_from_env;
/// The rules `lint` and the checks before a run apply (`docs/ddl-safety.md`).
pub use dirthara_ddl::{rules, Rule, Severity};
pub use dirthara_source::sql::SqlDialect;
pub use engine::{
    DriftReference, DriftReport, LintAgainst, LintReport, Migrator, SquashReport, WaitFor,
    WaitReport,
};
pub use error::{Code, DatabaseError, Error, ErrorKind, Problem, Result};
pub use events::{Blocker, Event, EventKind, EventSink, LockHolder, Warning};
/// The versions a baseline stands for, as `status` and `squash` show them.
pub use format::squashed_range as format_squashed_range;
pub use format::{format_duration, format_timestamp};
pub use history::{RecordState, RecordedFailure, DEFAULT_HISTORY_TABLE};
pub use migration::{
    checksum, Direction, DownStep, Migration, StepFormat, StepSource, DEFAULT_CONNECTION,
};
pub use plan::{
    Command, MigrationState, MigrationStatus, RepeatableState, RepeatableStatus, Resolution,
    RollbackScope,
};
pub use redact::redact_url;
pub use report::{
    ForceUnlockReport, LockReport, LockState, OtherLock, Preview, PreviewStep, RunReport,
    StatusReport, StepReport,
};
pub use rust_migration::{Connection, RustMigration, StepError};
pub use schema::{
    compare as compare_schemas, compare_versions as compare_schema_versions, AppliedVersion,
    Change, Drift, SchemaDump, SchemaObject, SchemaSnapshot,
};
pub use source::DirectoryLayout;
#[cfg(feature = "otel")]
pub use telemetry::Telemetry;
pub use vocabulary::{LockStrategy, Operation};

/// The Rust examples of the README and the recipes page, compiled (and where they need no
/// database, run) as doctests, so the docs show code that builds against this API. Their
/// other examples are run by the CLI's `tests/doc_examples.rs`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/recipes.md")]
pub struct RecipesExamples;
