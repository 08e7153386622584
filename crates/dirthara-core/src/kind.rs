//! The kinds of database dirthara migrates, and every fact about each that holds before a
//! connection exists: the URL schemes that select it, its name, the language its migrations
//! are written in, what its transactions and table locks do, and what it offers for locking.
//! One row per kind ([`BackendKind::facts`]); the engine, `preview`, the loader, redaction
//! and the lock read them here, and each driver answers its connection's
//! [`Capabilities`] from this table (a server may turn out to offer less: see
//! [`LockSupport`]).
//!
//! Imports nothing of the crate: every layer may read it.

use std::time::Duration;

use dirthara_source::migration::StepFormat;
use dirthara_source::sql::SqlDialect;

/// The kind of database a URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// `sqlite:` — a file, or `sqlite::memory:`.
    Sqlite,
    /// `postgres://`, `postgresql://`.
    Postgres,
    /// `mysql://`, `mariadb://`: MySQL and MariaDB.
    Mysql,
    /// `mongodb://`, `mongodb+srv://`.
    Mongo,
    /// `memory:` — the in-memory backend of the engine's own tests; never in a release build.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    Memory,
}

/// What a kind of database is, and what a connection to it can do. The engine asks this,
/// never which database it is, so the in-memory backend of its tests can declare any
/// combination and reach every branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The database's name in messages.
    pub database: &'static str,
    /// A step and its history change can commit in one transaction (false on MySQL, where
    /// DDL commits implicitly).
    pub transactional_ddl: bool,
    /// Every history write is a commit of its own (a log flush), and no step shares a
    /// transaction with its record: a step's completion is then best written together with
    /// the next step's `running` marker, in one transaction (MySQL/MariaDB).
    pub folds_records: bool,
    /// A statement waiting for a table (or metadata) lock queues the application's queries
    /// behind it, so a step's statements give way after `table_lock_timeout` (PostgreSQL,
    /// MySQL/MariaDB; not SQLite, whose writers wait on the whole file, nor MongoDB).
    pub table_locks: bool,
    /// What a table-lock timeout is counted in: a timeout the engine shortens itself is
    /// rounded down to it (MySQL's `lock_wait_timeout` counts whole seconds).
    pub lock_wait_unit: Duration,
    /// How the SQL tokenizer reads the database's steps (where statements end, what controls
    /// a transaction, MySQL's client `DELIMITER` lines); `None` for a database that does not
    /// take SQL.
    pub sql_dialect: Option<SqlDialect>,
}

impl Capabilities {
    /// What the database's migrations are written in.
    pub fn step_format(&self) -> StepFormat {
        match self.sql_dialect {
            Some(_) => StepFormat::Sql,
            None => StepFormat::MongoCommands,
        }
    }
}

/// Every fact of one kind: a row of the kind table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KindFacts {
    /// The URL schemes that select it, lower case, the first the one advice names.
    pub schemes: &'static [&'static str],
    /// Reached over the network (a URL with `//`), as opposed to a file: connecting creates
    /// nothing.
    pub is_server: bool,
    /// What a connection to it can do.
    pub capabilities: Capabilities,
    /// What it offers for locking, before connecting (the server may turn out to offer less).
    pub lock_support: LockSupport,
}

impl BackendKind {
    /// Every kind a URL can select, in the order advice lists them.
    pub const ALL: &'static [BackendKind] = &[
        BackendKind::Postgres,
        BackendKind::Mysql,
        BackendKind::Sqlite,
        BackendKind::Mongo,
    ];

    /// The kind table: one row per kind.
    pub const fn facts(self) -> KindFacts {
        const MS: Duration = Duration::from_millis(1);
        match self {
            BackendKind::Sqlite => KindFacts {
                schemes: &["sqlite"],
                is_server: false,
                capabilities: Capabilities {
                    database: "sqlite",
                    transactional_ddl: true,
                    folds_records: false,
                    table_locks: false,
                    lock_wait_unit: MS,
                    sql_dialect: Some(SqlDialect::Sqlite),
                },
                lock_support: LockSupport::none("sqlite"),
            },
            BackendKind::Postgres => KindFacts {
                schemes: &["postgres", "postgresql"],
                is_server: true,
                capabilities: Capabilities {
                    database: "postgres",
                    transactional_ddl: true,
                    folds_records: false,
                    table_locks: true,
                    lock_wait_unit: MS,
                    sql_dialect: Some(SqlDialect::Postgres),
                },
                lock_support: LockSupport::session("postgres"),
            },
            BackendKind::Mysql => KindFacts {
                schemes: &["mysql", "mariadb"],
                is_server: true,
                capabilities: Capabilities {
                    database: "mysql",
                    transactional_ddl: false,
                    folds_records: true,
                    table_locks: true,
                    // `lock_wait_timeout` counts whole seconds.
                    lock_wait_unit: Duration::from_secs(1),
                    sql_dialect: Some(SqlDialect::MySql),
                },
                lock_support: LockSupport::session("mysql"),
            },
            BackendKind::Mongo => KindFacts {
                schemes: &["mongodb", "mongodb+srv"],
                is_server: true,
                capabilities: Capabilities {
                    database: "mongodb",
                    // A step declared `"transaction": true` commits with its record.
                    transactional_ddl: true,
                    folds_records: false,
                    table_locks: false,
                    lock_wait_unit: MS,
                    sql_dialect: None,
                },
                lock_support: LockSupport {
                    lease_is_native: true,
                    ..LockSupport::none("mongodb")
                },
            },
            #[cfg(feature = "testing")]
            BackendKind::Memory => KindFacts {
                schemes: &["memory"],
                is_server: false,
                capabilities: Capabilities {
                    database: "memory",
                    transactional_ddl: true,
                    folds_records: false,
                    table_locks: false,
                    lock_wait_unit: MS,
                    sql_dialect: Some(SqlDialect::Postgres),
                },
                lock_support: LockSupport::session("memory"),
            },
        }
    }

    /// The kind a URL scheme selects (any case), if any.
    pub fn from_scheme(scheme: &str) -> Option<Self> {
        let scheme = scheme.to_ascii_lowercase();
        Self::ALL
            .iter()
            .chain(Self::TEST_KINDS)
            .copied()
            .find(|kind| kind.facts().schemes.contains(&scheme.as_str()))
    }

    #[cfg(feature = "testing")]
    const TEST_KINDS: &'static [BackendKind] = &[BackendKind::Memory];
    #[cfg(not(feature = "testing"))]
    const TEST_KINDS: &'static [BackendKind] = &[];

    /// The database's name in messages: `sqlite`, `postgres`, `mysql`, `mongodb`.
    pub const fn name(self) -> &'static str {
        self.facts().capabilities.database
    }

    /// What a connection to it can do, as far as its kind goes.
    pub const fn capabilities(self) -> Capabilities {
        self.facts().capabilities
    }

    /// What it offers for locking, before connecting to it.
    pub const fn lock_support(self) -> LockSupport {
        self.facts().lock_support
    }

    /// Reached over the network: connecting creates nothing.
    pub const fn is_server(self) -> bool {
        self.facts().is_server
    }
}

/// Every URL scheme of a database server (lower case): the schemes a URL must follow with
/// `//`, and the ones redaction knows a URL by.
pub fn is_server_scheme(scheme: &str) -> bool {
    BackendKind::from_scheme(scheme).is_some_and(|kind| kind.is_server())
}

/// What a database offers for locking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockSupport {
    /// The database's name in messages (`sqlite`, `postgres`, `CockroachDB`, ...).
    pub database: &'static str,
    /// Whether it has a named session lock that excludes other sessions.
    pub session_lock: SessionLockSupport,
    /// Its own lock is the lease (`locking = true` means a lease there).
    pub lease_is_native: bool,
}

/// Whether a database's session lock can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionLockSupport {
    /// A named lock held by a session, released when it ends (PostgreSQL, MySQL/MariaDB).
    Native,
    /// None at all (SQLite, MongoDB).
    Absent,
    /// The server speaks the protocol of a database that has one, but fakes it, lacks it, or
    /// keeps it in a way that does not exclude every runner.
    Unreliable {
        /// The server as it names itself (`CockroachDB`, `TiDB`, ...).
        server: &'static str,
        /// What is wrong with its session lock, in a clause ("its advisory-lock functions
        /// are documented no-ops").
        reason: &'static str,
    },
}

impl LockSupport {
    /// A database whose session lock is the native lock.
    pub const fn session(database: &'static str) -> Self {
        LockSupport {
            database,
            session_lock: SessionLockSupport::Native,
            lease_is_native: false,
        }
    }

    /// Whether a session lock can be taken here at all.
    pub fn has_session_lock(self) -> bool {
        self.session_lock == SessionLockSupport::Native
    }

    /// A database with no lock of its own (SQLite; MongoDB, whose own lock is the lease).
    pub const fn none(database: &'static str) -> Self {
        LockSupport {
            database,
            session_lock: SessionLockSupport::Absent,
            lease_is_native: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_selects_its_kind_in_any_case_and_no_two_kinds_share_one() {
        let mut seen = std::collections::BTreeSet::new();
        for &kind in BackendKind::ALL {
            for scheme in kind.facts().schemes {
                assert!(seen.insert(*scheme), "{scheme} twice");
                assert_eq!(BackendKind::from_scheme(scheme), Some(kind));
                assert_eq!(
                    BackendKind::from_scheme(&scheme.to_ascii_uppercase()),
                    Some(kind)
                );
            }
        }
        assert_eq!(BackendKind::from_scheme("oracle"), None);
        assert!(is_server_scheme("mongodb+srv") && !is_server_scheme("sqlite"));
    }
}
