//! dirthara-core: the layers of dirthara that need no database driver, only std, tokio and
//! serde. `dirthara` (the engine and one module per database) builds on it, and `dirthara-cli`
//! on `dirthara`; Cargo forbids the reverse, so nothing here can reach a backend or the engine.
//!
//! # Layout
//!
//! From the bottom up; a module imports only modules above it in this list, never one below
//! (`bench/module_cycles.py` checks, in CI):
//!
//! - `text`, `format`, `backoff`, `host`: small helpers (cutting text between characters,
//!   how durations and instants are printed, jittered backoff, this machine's name).
//! - `kind`: the kind table — every fact about each kind of database that holds before a
//!   connection exists ([`BackendKind`], [`Capabilities`]).
//! - `redact`: connection strings made safe to print.
//! - `vocabulary`: the small value types every layer names ([`Code`], [`LockStrategy`],
//!   [`Operation`], [`Outcome`]).
//! - `migration`, `step_report`: what a migration is (from `dirthara-source`), and what
//!   happened to one step.
//! - `events`: the event vocabulary, its JSON, and its `tracing` adapter.
//! - `blocking`: the blocking-DDL policy (a finding of `dirthara-ddl` on a table of a known
//!   size, and whether it refuses a run), pure.
//! - `history`: the history's records and the digest that proves a no-op.
//! - `error`: the typed error, its codes and messages.
//! - `config`: the settings, declared once, and the file, environment and flag layers that
//!   read them.
//! - `plan`: the planner, pure functions from (migrations, history, command) to a plan, and
//!   the table-lock retry policy (`plan/retry.rs`).
//! - `report`: what a command returns.
//! - `schema`: a schema read from a catalog as objects with canonical texts, the dump file
//!   it renders to and reads back from, and the object-by-object comparison (pure).
//! - `lock`: the lock algorithm — strategy, one wait loop, the held lock as a value, the lease
//!   over a small store trait — and the primitives a backend implements ([`lock::LockHost`],
//!   [`lock::SessionLock`], [`lock::LeaseStore`]).

// The planted faults' hooks are macros, used by the modules below (and by `dirthara`).
#[macro_use]
mod failpoints;

pub mod backoff;
pub mod blocking;
pub mod config;
pub mod error;
pub mod events;
pub mod format;
pub mod history;
pub mod host;
pub mod kind;
pub mod lock;
pub mod migration;
pub mod plan;
pub mod redact;
pub mod report;
pub mod schema;
pub mod step_report;
pub mod text;
pub mod vocabulary;

#[cfg(feature = "failpoints")]
pub use failpoints::{planted_faults_from_env, planted_pause};

pub use config::{Config, LockWait, Locking};
pub use error::{DatabaseError, Error, ErrorKind, Result};
pub use format::{format_duration, format_timestamp};
pub use kind::{BackendKind, Capabilities};
pub use redact::redact_url;
pub use vocabulary::{Code, LockStrategy, Operation, Outcome};
