//! The chaos checker: K runners migrate one database while runners are SIGKILLed at random
//! and (on PostgreSQL and MariaDB, private instances of the test's own) the server restarts
//! mid-round; then the checker judges what happened. A [`round`] returns the violations it
//! found as a value: the product's tests assert the list is empty, and a test that plants a
//! fault (runner environment [`Settings::runner_env`], e.g. `FAILPOINTS=...`) asserts it
//! is not.
//!
//! - [`workload`]: the migrations, which count their own executions;
//! - [`runners`]: the runner processes and what they printed;
//! - [`snapshot`]: the database read in one snapshot, once every runner's session ended;
//! - [`verdict`]: the rules, pure functions from those to violations;
//! - [`round`](mod@round): one round, start to finish.
#![allow(dead_code)]

pub(crate) mod round;
pub(crate) mod runners;
pub(crate) mod snapshot;
pub(crate) mod verdict;
pub(crate) mod workload;

use std::time::Duration;

use crate::support::private_server::PrivateServer;
use crate::support::servers::{Server, TestDb};

// The checker's interface, for tests that plant a fault and assert what it reports.
#[allow(unused_imports)]
pub(crate) use round::{round, RoundReport, Tally};
#[allow(unused_imports)]
pub(crate) use verdict::{Rule, Violation};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Postgres,
    Mysql,
    Sqlite,
    Mongo,
}

impl Kind {
    fn server(self) -> Option<Server> {
        match self {
            Kind::Postgres => Some(Server::Postgres),
            Kind::Mysql => Some(Server::Mysql),
            Kind::Mongo => Some(Server::Mongo),
            Kind::Sqlite => None,
        }
    }

    /// SQLite and MongoDB lock with a lease; the SQL servers with their session lock.
    fn leases(self) -> bool {
        matches!(self, Kind::Sqlite | Kind::Mongo)
    }
}

/// Where one round runs: a fresh SQLite file or a fresh server database.
pub(crate) enum Place {
    Sqlite(tempfile::TempDir),
    Server(TestDb),
}

impl Place {
    pub(crate) fn url(&self) -> String {
        match self {
            Place::Sqlite(dir) => format!("sqlite:{}", dir.path().join("chaos.db").display()),
            Place::Server(db) => db.url.clone(),
        }
    }
}

/// The size of a round. Defaults are CI's short round; `DIRTHARA_CHAOS_MIGRATIONS`,
/// `DIRTHARA_CHAOS_RUNNERS` and `DIRTHARA_CHAOS_SECONDS` lengthen it.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub migrations: u64,
    pub runners: usize,
    pub window: Duration,
    /// Extra environment for every runner (not the resolve and clean runs after it).
    pub runner_env: Vec<(String, String)>,
}

pub(crate) fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Settings {
    pub(crate) fn from_env() -> Settings {
        Settings {
            migrations: setting("DIRTHARA_CHAOS_MIGRATIONS", 40),
            runners: setting("DIRTHARA_CHAOS_RUNNERS", 6) as usize,
            window: Duration::from_secs(setting("DIRTHARA_CHAOS_SECONDS", 4)),
            runner_env: Vec::new(),
        }
    }
}

/// The backend the rounds run on, and the private server they restart, if they do.
pub(crate) struct Target {
    pub kind: Kind,
    private: Option<PrivateServer>,
}

impl Target {
    /// With `restarts` (PostgreSQL and MariaDB only), a private server of the test's own,
    /// which the rounds restart; else the test server of `DIRTHARA_TEST_*_URL` (or a SQLite
    /// file), which nothing stops. `None` when a private server cannot be made (skipped,
    /// said why; a failure under `DIRTHARA_REQUIRE_SERVERS=1`).
    pub(crate) fn new(kind: Kind, restarts: bool) -> Option<Target> {
        let private = match kind.server() {
            Some(server) if restarts && server != Server::Mongo => {
                Some(PrivateServer::start_or_skip(server)?)
            }
            _ => None,
        };
        Some(Target { kind, private })
    }

    pub(crate) fn restarts(&self) -> bool {
        self.private.is_some()
    }

    /// A fresh place for one round; `None` when the server is not there (skipped).
    async fn place(&self) -> Option<Place> {
        let Some(server) = self.kind.server() else {
            return Some(Place::Sqlite(crate::support::scratch_dir()));
        };
        let db = match &self.private {
            Some(private) => Some(
                TestDb::try_create_at(server, &private.admin_url())
                    .await
                    .unwrap_or_else(|e| panic!("{e}; server log:\n{}", private.log())),
            ),
            None => TestDb::create(server).await,
        };
        db.map(Place::Server)
    }

    fn restart(&mut self) {
        if let Some(private) = &mut self.private {
            if let Err(e) = private.restart() {
                panic!("restarting the private server failed: {e}");
            }
        }
    }
}
