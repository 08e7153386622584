//! Lock scenarios as tables: a scenario is an `async fn` taking a row (the database it runs
//! on, and what differs there), and [`scenario_tests!`](crate::scenario_tests) makes one
//! test per row and scenario. Adding a backend to a table is one row.
//!
//! [`Place`] is the database of one test: a SQLite file or a throwaway database on a test
//! server, with what a scenario needs to know of it.

use std::path::Path;
use std::process::Output;

use tempfile::TempDir;

use super::servers::{Server, TestDb};
use super::{dirthara, scratch_dir, Migrations};

/// One test per row and scenario: `scenario_tests! { row => ROW => [scenario, ...], ... }`
/// makes the module `row`, holding for each listed scenario the test `scenario`, which runs
/// `scenario(ROW)` (an `async fn` of the invoking file) on a multi-threaded runtime.
#[macro_export]
macro_rules! scenario_tests {
    ($($row:ident => $value:expr => [$($scenario:ident),* $(,)?]),* $(,)?) => {
        $(
            mod $row {
                use super::*;
                $(
                    #[tokio::test(flavor = "multi_thread")]
                    async fn $scenario() {
                        super::$scenario($value).await;
                    }
                )*
            }
        )*
    };
}

/// Where a scenario runs: the database a row names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Database {
    /// A SQLite file shared by the processes of the test.
    Sqlite,
    Server(Server),
}

/// The database of one test.
pub(crate) enum Place {
    Sqlite(TempDir),
    Server(TestDb),
}

impl Place {
    /// A new SQLite file or server database; `None` (after saying so) when the server is not
    /// there, and the test is skipped (a failure under `DIRTHARA_REQUIRE_SERVERS=1`).
    pub(crate) async fn new(database: Database) -> Option<Place> {
        match database {
            Database::Sqlite => Some(Place::Sqlite(scratch_dir())),
            Database::Server(server) => TestDb::create(server).await.map(Place::Server),
        }
    }

    pub(crate) fn url(&self) -> String {
        match self {
            Place::Sqlite(dir) => format!("sqlite:{}", dir.path().join("lock.db").display()),
            Place::Server(db) => db.url.clone(),
        }
    }

    /// The server database; `None` for SQLite.
    pub(crate) fn db(&self) -> Option<&TestDb> {
        match self {
            Place::Sqlite(_) => None,
            Place::Server(db) => Some(db),
        }
    }

    /// `dirthara ARGS` here, with the migrations of `dir`; on SQLite, which has no session
    /// lock, a command that takes the lock runs without it (`--no-lock`).
    pub(crate) fn run_cli(&self, dir: &Path, args: &[&str]) -> Output {
        let mut cmd = dirthara(&self.url(), dir, &[]);
        if self.db().is_none() && args[0] != "dump" {
            cmd.arg("--no-lock");
        }
        cmd.args(args).output().unwrap()
    }

    /// Runs `sql` here, outside dirthara (a SQL database): a change made by hand.
    pub(crate) async fn execute(&self, sql: &str) {
        use sqlx::{Connection, Executor};
        match self {
            Place::Server(db) => db.execute(sql).await,
            Place::Sqlite(dir) => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(dir.path().join("lock.db"))
                    .create_if_missing(true);
                let mut conn = sqlx::SqliteConnection::connect_with(&options)
                    .await
                    .unwrap();
                conn.execute(sql).await.unwrap();
            }
        }
    }

    /// `count` trivial migrations, each creating a table (a collection on MongoDB).
    pub(crate) fn migrations(&self, count: i64) -> Migrations {
        match self.db().map(|db| db.server) {
            Some(Server::Mongo) => Migrations::collections(count),
            _ => Migrations::tables(count),
        }
    }

    /// A step that keeps the database busy for about `seconds` (SQLite has no sleep: a
    /// recursive count of `seconds` times 1.5 million rows).
    pub(crate) fn busy_step(&self, seconds: f64) -> String {
        match self.db() {
            Some(db) => db.server.sleep(seconds),
            None => format!(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {}) \
                 SELECT count(*) FROM n",
                (seconds * 1_500_000.0) as u64
            ),
        }
    }
}
