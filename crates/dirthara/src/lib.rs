//! dirthara: database schema migrations that stay correct when two runners collide.
//!
//! # Layout
//!
//! - [`migration`], [`source`]: what a migration is, and loading it from directories —
//!   every malformed file is refused before a database is touched.
//! - [`plan`]: the planner, a pure function from (migrations, history, command) to a plan.
//! - [`lock`]: which lock a command takes and how a runner waits for it.
//! - [`backend`]: how each database stores the history, runs a step and locks; the SQL
//!   backends share one implementation and differ only in their driver.
//! - [`engine`]: [`Migrator`], the one place that decides when to lock, read, plan, apply
//!   and release. The `dirthara` CLI is a thin layer over it.
//! - [`code`]: migrations written in Rust, mixed with file migrations.
//! - [`config`], [`error`], [`events`], [`report`]: settings in, errors/events/results out.
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
//! the outcome. On PostgreSQL and MySQL/MariaDB it is a session lock: a second runner waits
//! (by default forever, see [`Config::lock_wait`]) and then finds nothing left to do; if the
//! process dies, the server releases the lock with the session. SQLite has no such lock:
//! with `locking = true` a run is refused before it reads anything; `locking = false` runs
//! unlocked, which is only safe with a single runner.

pub mod backend;
pub mod code;
pub mod config;
pub mod engine;
pub mod error;
pub mod events;
pub mod history;
pub mod lock;
pub mod migration;
pub mod plan;
pub mod report;
pub mod source;

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

pub use code::RustMigration;
pub use config::{Config, LockWait, Locking};
pub use engine::{Migrator, Resolution};
pub use error::{Code, Error, ErrorKind, Result};
pub use events::{Event, EventSink, LockHolder, Warning};
pub use migration::{Direction, Migration};
pub use plan::{Command, RollbackScope};
pub use report::{LockReport, LockState, Preview, RunReport, StatusReport};

pub(crate) fn hostname() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}
