//! `lint`: what the migrations' statements would do to the tables they touch, without running
//! them. Offline it judges by the oldest server version dirthara supports, on the dialect of
//! each connection's URL (or the one asked for, where no URL is configured); live it asks each
//! connection's server for its version and the catalog for each flagged table's size. Never
//! takes the lock, never changes anything.

use serde::Serialize;

use super::Migrator;
use crate::blocking::{Judge, StepFinding, UnreadStatement};
use crate::error::Result;
use crate::kind::BackendKind;
use crate::migration::{Direction, DownSteps};
use crate::source::sql::SqlDialect;

/// What `lint` looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LintAgainst {
    /// The live databases of the configured connections: their versions and table sizes.
    Live,
    /// No database: the rules of the oldest supported server, of each connection's kind when
    /// it has a URL, else of `dialect` (`postgres` or `mysql`).
    Offline {
        /// The SQL the files are written in where no URL says (PostgreSQL by default).
        dialect: Option<SqlDialect>,
    },
}

/// What `lint` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LintReport {
    /// Every finding, in version order.
    pub findings: Vec<StepFinding>,
    /// Statements the parser did not read.
    pub not_analysed: Vec<UnreadStatement>,
    /// Whether sizes and versions came from the live databases.
    pub live: bool,
    /// `blocking_table_size` as judged against (`null`: off).
    pub blocking_table_size: Option<u64>,
    /// The migrations read.
    pub migrations: usize,
}

impl LintReport {
    /// The findings the files should not carry as they are (`lint` exits 1 with any): a
    /// statement that fails wherever it runs, or one that blocks the application (on a table
    /// over `blocking_table_size`, when its size is known), that nothing allowed.
    pub fn not_allowed(&self) -> impl Iterator<Item = &StepFinding> {
        self.findings.iter().filter(|f| f.refuses)
    }
}

impl Migrator {
    /// Reads every migration's up step as its database would run it, and says what each
    /// statement would do to the tables it touches (see [`LintAgainst`]). Never takes the
    /// lock and never changes anything.
    pub async fn lint(&self, against: LintAgainst) -> Result<LintReport> {
        let mut connections = self.connections();
        if against == LintAgainst::Live {
            self.checked(&connections)?;
        }
        let mut migrations = self.migrations(DownSteps::Skip, &connections)?;
        if let LintAgainst::Offline { dialect } = against {
            // A connection without a URL is read as the asked dialect's database would read
            // it (a step made only of `CREATE INDEX CONCURRENTLY` runs outside a transaction
            // there), so offline and live lint judge the same step the same way.
            let unread: std::collections::BTreeSet<&str> = (migrations.iter())
                .map(|m| m.connection.as_str())
                .filter(|name| connections.kind(name).is_err())
                .collect();
            if !unread.is_empty() {
                for name in unread {
                    connections = connections.with(name, Ok(offline_kind(dialect)));
                }
                migrations = self.migrations(DownSteps::Skip, &connections)?;
            }
        }
        let config = &self.config;
        let mut judge = Judge::new(&config.lint_disabled, false);
        let mut opened = std::collections::BTreeMap::new();
        for migration in migrations.iter() {
            let name = migration.connection.as_str();
            match against {
                LintAgainst::Live => {
                    if !opened.contains_key(name) {
                        let backend = self.connect(&connections, name, "lint", true).await?;
                        opened.insert(name.to_string(), backend);
                    }
                    let backend = &opened[name];
                    let version = backend.server_version().map(str::to_string);
                    judge.analyze(
                        migration,
                        Direction::Up,
                        name,
                        &backend.capabilities(),
                        version.as_deref(),
                    );
                }
                LintAgainst::Offline { dialect } => {
                    let kind = connections.kind(name).unwrap_or(offline_kind(dialect));
                    judge.analyze(migration, Direction::Up, name, &kind.capabilities(), None);
                }
            }
        }
        let sized = async {
            if against == LintAgainst::Live {
                super::blocking::ask_servers(&mut judge, &mut opened).await?;
            }
            let tables = judge.tables();
            for (name, tables) in &tables {
                if let Some(backend) = opened.get_mut(name) {
                    let sizes = backend.table_sizes(tables).await?;
                    judge.sized(name, tables, &sizes);
                }
            }
            Ok::<(), crate::error::Error>(())
        }
        .await;
        for (_, backend) in opened {
            backend.close().await;
        }
        sized?;
        let not_analysed = judge.not_analysed().to_vec();
        Ok(LintReport {
            findings: (judge.findings().into_iter())
                .map(|finding| finding.judged_for_lint(config.blocking_table_size))
                .collect(),
            not_analysed,
            live: against == LintAgainst::Live,
            blocking_table_size: config.blocking_table_size,
            migrations: migrations.len(),
        })
    }
}

/// The database a connection without a URL is judged as, offline: `dialect`'s (PostgreSQL
/// unless MySQL is asked for).
fn offline_kind(dialect: Option<SqlDialect>) -> BackendKind {
    match dialect {
        Some(SqlDialect::MySql) => BackendKind::Mysql,
        _ => BackendKind::Postgres,
    }
}
