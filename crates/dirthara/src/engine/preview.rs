//! The commands that only look: what a command, or adopting another tool's history, would do
//! now. No lock is taken and nothing is changed, so the answer may be stale at once.

use super::attempts::{giving_of, requested_timeout, Ground};
use super::step::Bracket;
use super::Migrator;
use crate::adopt::{AdoptSource, AdoptionReport};
use crate::error::Result;
use crate::migration::{Direction, DownSteps};
use crate::plan::retry::{Giving, Retried};
use crate::plan::{self, Command};
use crate::report::{Preview, PreviewStep};

impl Migrator {
    /// What `baseline --from` would record now, reading both histories without the lock
    /// and changing nothing.
    pub async fn preview_baseline_from(&self, source: &AdoptSource) -> Result<AdoptionReport> {
        source.check()?;
        let connections = self.connections();
        let available = self.migrations(DownSteps::Skip, &connections)?;
        self.checked(&connections)?;
        let mut history = self.connect_history(&connections, "preview").await?;
        let result = async {
            let connection = self.config.history_connection.as_str();
            let foreign = crate::adopt::read(history.as_mut(), connection, source).await?;
            let applied = history.read_history().await?.unwrap_or_default();
            let planned = plan::plan_adoption(&available, &applied, &foreign)?;
            Ok(AdoptionReport::new(source, &planned, None))
        }
        .await;
        history.close().await;
        result
    }

    /// The plan `command` would run now, with each step's text. Takes no lock and changes
    /// nothing, so it may be stale as soon as it returns.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// let preview = migrator.preview(dirthara::Command::Migrate).await?;
    /// assert_eq!(preview.steps[0].sql, "CREATE TABLE users (id INT)");
    /// # Ok(()) }
    /// ```
    pub async fn preview(&self, command: Command) -> Result<Preview> {
        let connections = self.connections();
        let available = self.migrations(command.down_steps(), &connections)?;
        self.checked(&connections)?;
        let applied = self.read_history_unlocked(&connections, "preview").await?;
        let planned = plan::plan(&available, &applied, command, self.plan_options())?;
        // How each step would give way to the application's table locks, from what its
        // connection's kind of database offers.
        let history = self.config.history_connection.as_str();
        let giving = |s: &crate::plan::PlannedStep<'_>| {
            let kind = connections.kind(&s.migration.connection).ok();
            let facts = kind.map_or((false, true), |k| k.table_locks_and_transactional_ddl());
            let bracket = if s.reverses_nothing() {
                Bracket::RecordOnly
            } else if s.transactional() && s.migration.connection == history && facts.1 {
                Bracket::Atomic
            } else {
                Bracket::Marked
            };
            let ground = Ground {
                table_locks: facts.0,
                transactional_ddl: facts.1,
                dialect: kind.and_then(crate::backend::BackendKind::sql_dialect),
                lock_wait_unit: kind.map_or(
                    std::time::Duration::ZERO,
                    crate::backend::BackendKind::lock_wait_unit,
                ),
            };
            giving_of(
                self.config.table_lock_timeout,
                s.migration,
                s.direction,
                bracket,
                s.transactional(),
                ground,
            )
        };
        let timeout_of = |s: &crate::plan::PlannedStep<'_>| match giving(s) {
            Giving::After { timeout, .. } => Some(timeout),
            Giving::Waits { .. } => None,
        };
        let connections: Vec<&str> = std::iter::once(self.config.history_connection.as_str())
            .chain(
                planned
                    .steps
                    .iter()
                    .map(|s| s.migration.connection.as_str()),
            )
            .collect();
        Ok(Preview {
            operation: command.into(),
            init_sql: (self.config.init_sql.iter())
                .filter(|(name, _)| connections.contains(&name.as_str()))
                .map(|(name, sql)| (name.clone(), sql.clone()))
                .collect(),
            notice: crate::report::PREVIEW_NOTICE.to_string(),
            drop_all: planned.drop_all,
            batch: planned
                .steps
                .iter()
                .any(|s| s.direction == Direction::Up)
                .then_some(planned.batch),
            steps: planned
                .steps
                .iter()
                .map(|s| PreviewStep {
                    version: s.migration.version,
                    name: s.migration.name.clone(),
                    direction: s.direction,
                    connection: s.migration.connection.clone(),
                    transactional: s.migration.transactional_in(s.direction),
                    own_transaction: (s.migration.own_transaction_in(s.direction))
                        .map(str::to_string),
                    reverses_nothing: s.reverses_nothing(),
                    out_of_order: s.out_of_order,
                    table_lock_timeout: timeout_of(s),
                    table_lock_timeout_rounded_from: timeout_of(s).and_then(|applied| {
                        requested_timeout(self.config.table_lock_timeout, s.migration, s.direction)
                            .filter(|&requested| requested != applied)
                    }),
                    retried: retried(giving(s), self.config.table_lock_retry_for),
                    sql: s.text().to_string(),
                })
                .collect(),
            warnings: planned.warnings,
        })
    }
}

/// What `preview` says of how a step that gave way is tried again.
fn retried(giving: Giving, budget: std::time::Duration) -> Option<String> {
    let for_ = crate::format_duration(budget);
    match giving {
        Giving::Waits { why } => why.map(|why| format!("no table-lock timeout: {why}")),
        Giving::After { retried, .. } => Some(match retried {
            Retried::Whole => format!("the whole step, for up to {for_}"),
            Retried::FromStatement => {
                format!("from the statement that gave way (those before it committed), for up to {for_}")
            }
            Retried::Never(why) => format!("never: {why}"),
        }),
    }
}
