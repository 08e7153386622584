//! The commands that only look: what a command, or adopting another tool's history, would do
//! now. No lock is taken and nothing is changed, so the answer may be stale at once.

use super::attempts::{giving_of, requested_timeout};
use super::blocking::{judge_plan, Backends};
use super::bracket::bracket_of;
use super::Migrator;
use crate::adopt::{AdoptSource, AdoptionReport};
use crate::backend::BackendKind;
use crate::error::Result;
use crate::migration::{split_repeatables, Direction, DownSteps};
use crate::plan::retry::{Giving, Retried};
use crate::plan::{self, Command};
use crate::report::{Preview, PreviewStep};

impl Migrator {
    /// What `baseline --from` would record now, reading both histories without the lock
    /// and changing nothing.
    pub async fn preview_baseline_from(&self, source: &AdoptSource) -> Result<AdoptionReport> {
        source.check()?;
        let connections = self.connections();
        let all = self.migrations(DownSteps::Skip, &connections)?;
        let (available, repeatables) = split_repeatables(&all);
        self.checked(&connections)?;
        let mut history = self.connect_history(&connections, "preview").await?;
        let result = async {
            let connection = self.config.history_connection.as_str();
            let foreign = crate::adopt::read(history.as_mut(), connection, source).await?;
            let applied = history.read_history().await?.unwrap_or_default();
            let planned = plan::plan_adoption(available, &applied, &foreign)?;
            let adopted = crate::adopt::repeatables(repeatables, &foreign);
            Ok(AdoptionReport::new(source, &planned, None).with_repeatables(&adopted))
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
        let all = self.migrations(command.down_steps(), &connections)?;
        let (available, repeatables) = split_repeatables(&all);
        self.checked(&connections)?;
        let mut opened = Opened {
            migrator: self,
            connections: &connections,
            history: self.connect_history(&connections, "preview").await?,
            others: Default::default(),
        };
        let planned = async {
            let applied = opened.history.read_history().await?.unwrap_or_default();
            let planned = plan::plan(available, &applied, command, self.plan_options())?;
            // What its statements would do, sized on the live catalog (`fresh` meets only
            // tables it just created).
            let judged = match command {
                Command::Fresh => None,
                _ => Some(judge_plan(&self.config, &planned, &mut opened).await?),
            };
            let every = match command {
                Command::Migrate => false,
                Command::Refresh | Command::Fresh => true,
                _ => return Ok((planned, judged, Vec::new())),
            };
            let records = match command {
                Command::Fresh => Vec::new(),
                _ => opened.history.read_repeatables().await?,
            };
            let due = plan::repeatables_to_apply(repeatables, &records, every);
            Ok::<_, crate::error::Error>((planned, judged, due))
        }
        .await;
        opened.close().await;
        let (planned, judged, due) = planned?;
        let (mut findings, step_locks) = match judged {
            Some(judged) => (judged.findings, judged.step_locks),
            None => Default::default(),
        };
        // How each step would give way to the application's table locks, from what its
        // connection's kind of database offers.
        let history = self.config.history_connection.as_str();
        // Every connection's kind was checked above.
        let capabilities = |name: &str| connections.kind(name).map(BackendKind::capabilities);
        let giving = |s: &crate::plan::PlannedStep<'_>| {
            let (Ok(history_can), Ok(step_can)) =
                (capabilities(history), capabilities(&s.migration.connection))
            else {
                return Giving::Waits { why: None };
            };
            let bracket = bracket_of(s, history, &history_can);
            giving_of(
                self.config.table_lock_timeout,
                s.migration,
                s.direction,
                bracket,
                s.transactional(),
                &step_can,
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
        let mut preview = Preview::new(command.into());
        preview.init_sql = (self.config.init_sql.iter())
            .filter(|(name, _)| connections.contains(&name.as_str()))
            .map(|(name, sql)| (name.clone(), sql.clone()))
            .collect();
        preview.drop_all = planned.drop_all;
        preview.batch = (planned.steps.iter())
            .any(|s| s.direction == Direction::Up)
            .then_some(planned.batch);
        let masked = self.masker();
        preview.steps = (planned.steps.iter())
            .map(|s| {
                let mut step = PreviewStep::new(
                    s.migration.version,
                    &s.migration.name,
                    s.direction,
                    &s.migration.connection,
                    masked(s.text()),
                );
                step.transactional = s.migration.transactional_in(s.direction);
                step.own_transaction =
                    (s.migration.own_transaction_in(s.direction)).map(str::to_string);
                step.reverses_nothing = s.reverses_nothing();
                step.out_of_order = s.out_of_order;
                step.table_lock_timeout = timeout_of(s);
                step.table_lock_timeout_rounded_from = timeout_of(s).and_then(|applied| {
                    requested_timeout(self.config.table_lock_timeout, s.migration, s.direction)
                        .filter(|&requested| requested != applied)
                });
                step.retried = retried(giving(s), self.config.table_lock_retry_for);
                step.table_locks = (step_locks.iter())
                    .find(|l| l.version == s.migration.version && l.direction == s.direction)
                    .map(|l| l.locks)
                    .filter(|&locks| locks > 1 && step.table_lock_timeout.is_some());
                let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut findings)
                    .into_iter()
                    .partition(|f| f.version == s.migration.version && f.direction == s.direction);
                findings = rest;
                step.findings = mine;
                step
            })
            .collect();
        let history_can = capabilities(history);
        preview.steps.extend(due.into_iter().map(|repeatable| {
            let text = repeatable.step(Direction::Up).unwrap_or_default();
            let mut step =
                PreviewStep::new(0, &repeatable.name, Direction::Up, history, masked(text));
            step.repeatable = true;
            step.transactional = repeatable.transactional_in(Direction::Up)
                && history_can.as_ref().is_ok_and(|can| can.transactional_ddl);
            step
        }));
        preview.warnings = planned.warnings;
        Ok(preview)
    }
}

/// The connections a preview reads, open until it is done.
struct Opened<'p> {
    migrator: &'p Migrator,
    connections: &'p super::Connections,
    history: Box<dyn crate::backend::Backend>,
    others: std::collections::BTreeMap<String, Box<dyn crate::backend::Backend>>,
}

impl Opened<'_> {
    async fn close(self) {
        self.history.close().await;
        for (_, other) in self.others {
            other.close().await;
        }
    }
}

impl Backends for Opened<'_> {
    async fn backend(
        &mut self,
        name: &str,
    ) -> Result<&mut (dyn crate::backend::Backend + 'static)> {
        if name == self.migrator.config.history_connection {
            return Ok(self.history.as_mut());
        }
        if !self.others.contains_key(name) {
            let backend = (self.migrator)
                .connect(self.connections, name, "preview", true)
                .await?;
            self.others.insert(name.to_string(), backend);
        }
        Ok(self.others.get_mut(name).expect("inserted above").as_mut())
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
