//! Migrations written in Rust, mixed freely with file migrations in one ordered set.
//!
//! A Rust migration receives the connection it declared — a sqlx connection, or a MongoDB
//! database (with the transaction's session when it runs in one) — and runs under the same
//! rules as a file: in a transaction with its history record where the database allows,
//! bracketed by a `running` record where it does not.
//!
//! Its checksum comes from [`RustMigration::revision`], a string you bump when you change
//! what `up` does: dirthara cannot hash compiled code. Bumping the revision of an applied
//! migration is reported like editing an applied file (`CHECKSUM_MISMATCH`; accept it with
//! `dirthara resolve V --accept-checksum`).

use async_trait::async_trait;

use crate::migration::{Migration, StepFormat, DEFAULT_CONNECTION};

/// What a Rust migration's step returns on failure; its text becomes the
/// `MIGRATION_FAILED` message.
pub type StepError = Box<dyn std::error::Error + Send + Sync>;

/// The connection a Rust migration runs on.
#[non_exhaustive]
pub enum Connection<'a> {
    /// A SQLite connection, inside the step's transaction when the migration is
    /// transactional.
    #[cfg(feature = "sqlite")]
    Sqlite(&'a mut sqlx::SqliteConnection),
    /// A PostgreSQL connection, inside the step's transaction when the migration is
    /// transactional.
    #[cfg(feature = "postgres")]
    Postgres(&'a mut sqlx::PgConnection),
    /// A MySQL/MariaDB connection, inside the step's transaction when the migration is
    /// transactional (DDL still commits implicitly there).
    #[cfg(feature = "mysql")]
    MySql(&'a mut sqlx::MySqlConnection),
    /// A MongoDB database.
    #[cfg(feature = "mongodb")]
    Mongo {
        /// The database the connection's URL names.
        db: &'a mongodb::Database,
        /// The transaction's session when the migration is transactional; pass it to every
        /// operation (`.session(session)`) so they commit with the history record.
        session: Option<&'a mut mongodb::ClientSession>,
    },
    /// Present so the enum is never empty, whatever features are enabled.
    #[doc(hidden)]
    _Unreachable(std::marker::PhantomData<&'a ()>),
}

/// A migration written in Rust.
///
/// # Examples
///
/// ```
/// use dirthara::{Connection, RustMigration, StepError};
///
/// struct BackfillEmails;
///
/// #[async_trait::async_trait]
/// impl RustMigration for BackfillEmails {
///     fn version(&self) -> i64 { 20240105000000 }
///     fn name(&self) -> &str { "backfill_emails" }
///     fn revision(&self) -> &str { "1" } // bump when `up` changes
///
///     async fn up(&self, conn: Connection<'_>) -> Result<(), StepError> {
///         let Connection::Sqlite(conn) = conn else { return Err("expected SQLite".into()) };
///         sqlx::query("UPDATE users SET email = lower(email)").execute(conn).await?;
///         Ok(())
///     }
/// }
///
/// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("sqlite:app.db"))
///     .with_rust_migration(BackfillEmails);
/// ```
#[async_trait]
pub trait RustMigration: Send + Sync {
    /// 0 ..= i64::MAX, unique across every migration (as for files).
    fn version(&self) -> i64;
    /// Letters, digits, `.`, `_` and `-` (as for files).
    fn name(&self) -> &str;
    /// Stands for the code in the checksum: change it whenever `up` changes meaning.
    fn revision(&self) -> &str;
    /// Whether the step and its history record may share one transaction (default true).
    fn transactional(&self) -> bool {
        true
    }
    /// The named connection the migration runs on (default `default`).
    fn connection(&self) -> &str {
        DEFAULT_CONNECTION
    }
    /// Whether [`RustMigration::down`] can reverse it (default false: irreversible).
    fn reversible(&self) -> bool {
        false
    }
    /// Applies the migration on `conn`. An error stops the run with `MIGRATION_FAILED`, and
    /// the step's transaction, if it has one, is rolled back.
    async fn up(&self, conn: Connection<'_>) -> Result<(), StepError>;
    /// Reverses the migration; called only when [`RustMigration::reversible`] is true. The
    /// default fails, naming the migration.
    async fn down(&self, _conn: Connection<'_>) -> Result<(), StepError> {
        Err(format!("{} has no down step", self.name()).into())
    }
}

/// The record the planner and history see for a Rust migration.
pub(crate) fn describe(code: &dyn RustMigration) -> Migration {
    let text = |direction: &str| {
        format!(
            "-- Rust migration {} {} (revision {}): {direction}",
            code.version(),
            code.name(),
            code.revision()
        )
    };
    let mut migration = Migration::new(code.version(), code.name(), text("up"));
    if code.reversible() {
        migration = migration.with_down(text("down"));
    }
    migration.transactional = code.transactional();
    if let Some(down) = &mut migration.down {
        down.transactional = code.transactional();
    }
    migration.connection = code.connection().to_string();
    migration.format = StepFormat::Rust;
    migration.origin = format!("Rust migration {} ({})", code.version(), code.name());
    migration
}
