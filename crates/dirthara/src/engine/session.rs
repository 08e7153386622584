//! One locked command: its connections, its lock, and the apply loop — the only one.

use std::collections::BTreeMap;

use super::bracket::{bracket_of, Bracket};
use super::{Connections, Migrator};
use crate::adopt::{AdoptSource, AdoptionReport};
use crate::backend::{Backend, Prepared};
use crate::error::{Error, ErrorKind, Result};
use crate::events::EventKind;
use crate::history::{runner_identity, HistoryChange, HistoryDigest};
use crate::lock::LOCK_NAME;
use crate::lock::{self, resolve_strategy, Carrier, HeldLock, LockCheck, Released, Waiting};
use crate::migration::{split_baselines, split_repeatables, Direction, Migration, StepFormat};
use crate::plan::{self, Command, Plan, Recording, Resolution};
use crate::report::{RunReport, StepReport};
use crate::vocabulary::LockStrategy;

/// One locked command's connections and progress. Ended only by [`Session::finish`], which
/// releases the lock and closes every connection whatever happened; if it is dropped instead
/// (its future abandoned), the lock still goes: the session lock with its connection, the
/// lease with its heartbeat.
pub(super) struct Session<'m> {
    pub(super) migrator: &'m Migrator,
    connections: &'m Connections,
    pub(super) operation: String,
    pub(super) history: Box<dyn Backend>,
    /// Connections other than the history connection, opened when a step needs them.
    pub(super) others: BTreeMap<String, Box<dyn Backend>>,
    pub(super) lock: HeldLock,
    pub(super) completed: Vec<StepReport>,
    /// Where each history write is a commit of its own (MySQL/MariaDB,
    /// [`Capabilities::folds_records`](crate::backend::Capabilities)): the last step's
    /// completion (`applied`, or the deletion after a down step), not yet written. It goes
    /// out with the next step's `running` marker, in one transaction, or alone when the loop
    /// ends however it ends. That halves the commits, and dirty detection is unchanged: the
    /// pair commits together, so the history moves from "N running" straight to "N applied,
    /// N+1 running" — one `running` record at most, at any instant; a crash before the pair
    /// is written leaves N `running`, which the next run reports as it would any interrupted
    /// step.
    pub(super) unrecorded: Option<Unrecorded>,
    /// `host:pid dirthara/x.y.z`, written into every record this session makes: asked of the
    /// system once, not once per migration.
    pub(super) applied_by: String,
    /// How many table locks each planned step takes that the application can queue behind
    /// (counted before the run, [`crate::blocking::StepLocks`]): its `table_lock_timeout` is
    /// shared between them. A step not counted takes one.
    pub(super) step_locks: BTreeMap<(i64, crate::migration::Direction), u32>,
    /// Each attempt that gave way (`TABLE_LOCK_TIMEOUT`), for the report's warnings.
    pub(super) gave_way: Vec<crate::events::Warning>,
    /// Records were written without running a step (`baseline`, `resolve`): the history now
    /// says another thing of the schema, so a snapshot is taken as after a step.
    pub(super) schema_touched: bool,
}

/// A step's completion left to be written with the next step's marker, and the step's
/// report, which is made only once that write succeeded.
pub(super) struct Unrecorded {
    pub(super) change: HistoryChange,
    pub(super) report: StepReport,
}

impl<'m> Session<'m> {
    /// Takes the lock on the history connection: the first thing done on the database. The
    /// configuration was validated by the caller, and a strategy the URL's kind of database
    /// cannot honour refused; what the server turned out to be decides it now.
    pub(super) async fn open(
        migrator: &'m Migrator,
        connections: &'m Connections,
        operation: &str,
        mut history: Box<dyn Backend>,
    ) -> Result<Session<'m>> {
        let config = &migrator.config;
        let connection = config.history_connection.as_str();
        let acquired = async {
            let resolved = resolve_strategy(config.locking, history.lock_support())
                .map_err(|refused| refused.into_error(connection))?;
            if let Some(reason) = resolved.because {
                migrator.events.emit(EventKind::LockChosen {
                    connection: connection.to_string(),
                    strategy: resolved.strategy,
                    reason,
                });
            }
            let waiting = Waiting {
                connection,
                wait: config
                    .lock_wait
                    .unwrap_or(crate::lock::default_wait(resolved.strategy)),
                events: &migrator.events,
                shutdown: migrator.shutdown.as_ref(),
                operation,
                lease_ttl: config.lock_ttl,
            };
            lock::acquire(history.lock_host(), resolved.strategy, &waiting).await
        }
        .await;
        match acquired {
            Ok(lock) => Ok(Session {
                migrator,
                connections,
                operation: operation.to_string(),
                history,
                others: BTreeMap::new(),
                lock,
                completed: Vec::new(),
                unrecorded: None,
                applied_by: runner_identity(),
                step_locks: BTreeMap::new(),
                gave_way: Vec::new(),
                schema_touched: false,
            }),
            Err(error) => {
                // Held by another runner: nothing was taken or changed, and the session is as
                // clean as it came (a fleet's next target may use it).
                let clean = error.code() == crate::Code::MigrationLockHeld;
                migrator.release_history(history, clean).await;
                Err(error)
            }
        }
    }

    pub(super) fn strategy(&self) -> LockStrategy {
        self.lock.strategy()
    }

    fn history_connection(&self) -> &str {
        &self.migrator.config.history_connection
    }

    /// Runs `command` over `all` (the versioned migrations, then the repeatable ones): the
    /// versioned steps it plans, then, for `migrate`, `refresh` and `fresh`, the repeatables.
    pub(super) async fn run_command(
        &mut self,
        all: &[Migration],
        command: Command,
        report: &mut RunReport,
    ) -> Result<()> {
        let (available, repeatables) = split_repeatables(all);
        let every = match command {
            Command::Migrate => false,
            Command::Refresh | Command::Fresh => true,
            // `migrate --to`, `rollback`: a partial move leaves the repeatables alone.
            _ => return self.run_versioned(available, command, report).await,
        };
        self.run_versioned(available, command, report).await?;
        self.apply_repeatables(repeatables, every, report).await
    }

    async fn run_versioned(
        &mut self,
        available: &[Migration],
        command: Command,
        report: &mut RunReport,
    ) -> Result<()> {
        let applied = match command {
            // Most runs find nothing to do: the history's digest says so without its records.
            Command::Migrate => {
                let expected = HistoryDigest::of_files(up_to_date(available));
                match self.history.prepare_history_expecting(&expected).await? {
                    Prepared::AsExpected => {
                        self.migrator.events.emit(EventKind::Planned {
                            operation: command.name().to_string(),
                            steps: 0,
                            by_digest: true,
                        });
                        return Ok(());
                    }
                    Prepared::Records(records) => records,
                }
            }
            _ => self.history.prepare_history().await?,
        };
        let planned = plan::plan(available, &applied, command, self.migrator.plan_options())?;
        for warning in &planned.warnings {
            self.migrator
                .events
                .emit(EventKind::Warning(warning.clone()));
        }
        self.migrator.events.emit(EventKind::Planned {
            operation: command.name().to_string(),
            steps: planned.steps.len(),
            by_digest: false,
        });
        report.warnings.extend(planned.warnings.iter().cloned());
        self.refuse_blocking_ddl(&planned, command, report).await?;
        if planned.drop_all {
            self.ensure_lock(None).await?;
            report.dropped = self.history.drop_all().await?;
            self.migrator.events.emit(EventKind::Dropped {
                connection: self.history_connection().to_string(),
                objects: report.dropped.clone(),
            });
            // The lock lives in the session, not in a table, so it survived the drop.
            self.history.prepare_history().await?;
        }
        self.apply(&planned, report).await
    }

    async fn apply(&mut self, planned: &Plan<'_>, report: &mut RunReport) -> Result<()> {
        let applied = self.apply_steps(planned).await;
        // Whatever ended the loop, the last completed step's record is written before the
        // command returns (a failure here leaves that one step `running`: dirty, never lost).
        let flushed = self.record_unrecorded().await;
        report.warnings.append(&mut self.gave_way);
        for done in &self.completed {
            match done.direction {
                Direction::Up => {
                    report.batch = Some(planned.batch);
                    report.applied.push(done.clone());
                }
                Direction::Down => report.reverted.push(done.clone()),
            }
        }
        match (applied, flushed) {
            (Ok(()), flushed) => flushed,
            (Err(error), Ok(())) => Err(error),
            (Err(error), Err(flush_error)) => Err(error.with_secondary(flush_error)),
        }
    }

    /// Writes the completion left for the next marker, if any.
    pub(super) async fn record_unrecorded(&mut self) -> Result<()> {
        let Some(pending) = self.unrecorded.take() else {
            return Ok(());
        };
        self.history.record(&[pending.change]).await?;
        self.completed_step(pending.report);
        Ok(())
    }

    /// A step whose records are written: said, and counted among the completed ones. Only
    /// then: until its record is written, a step is not done, whatever it ran.
    pub(super) fn completed_step(&mut self, done: StepReport) {
        self.migrator.events.emit(EventKind::MigrationFinished {
            version: done.version,
            name: done.name.clone(),
            direction: done.direction,
            duration: std::time::Duration::from_millis(done.duration_ms),
            reverses_nothing: done.reverses_nothing,
            repeatable: done.repeatable,
        });
        self.completed.push(done);
    }

    async fn apply_steps(&mut self, planned: &Plan<'_>) -> Result<()> {
        for (index, step) in planned.steps.iter().enumerate() {
            if self.interrupted() {
                return Err(Error::new(ErrorKind::Interrupted {
                    remaining: planned.steps[index..]
                        .iter()
                        .map(|s| (s.migration.version, s.migration.name.clone()))
                        .collect(),
                }));
            }
            let history = &self.migrator.config.history_connection;
            let carrier = match bracket_of(step, history, &self.history.capabilities()) {
                Bracket::RecordOnly => Carrier::Nothing,
                Bracket::Marked => Carrier::Marker,
                Bracket::Atomic if step.migration.format != StepFormat::Rust => Carrier::AtomicText,
                Bracket::Atomic => Carrier::Nothing,
            };
            let check = self.lock.check_for(carrier);
            if check == LockCheck::Before {
                self.ensure_lock(Some(step.migration)).await?;
            }
            let running = self.run_step(step, planned.batch, check);
            #[cfg(feature = "tracing")]
            let running = tracing::Instrument::instrument(
                running,
                tracing::info_span!(
                    target: "dirthara",
                    "dirthara.migration",
                    version = step.migration.version,
                    name = %step.migration.name,
                    direction = %step.direction
                ),
            );
            match running.await {
                Ok(()) => {}
                // The check rolls the step back when the lock is gone: say that, not "failed".
                Err(error) if check == LockCheck::InStep => {
                    let migration = (step.migration.version, step.migration.name.as_str());
                    let host = self.history.lock_host();
                    return Err(self
                        .lock
                        .explain_in_step_failure(host, error, migration)
                        .await);
                }
                // Stopped between two attempts of this step: it and the rest are undone.
                Err(error) if error.code() == crate::Code::Interrupted => {
                    return Err(Error::new(ErrorKind::Interrupted {
                        remaining: planned.steps[index..]
                            .iter()
                            .map(|s| (s.migration.version, s.migration.name.clone()))
                            .collect(),
                    }))
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    pub(super) fn interrupted(&self) -> bool {
        self.migrator
            .shutdown
            .as_ref()
            .is_some_and(|rx| *rx.borrow())
    }

    /// Confirms the lock is still ours before changing anything more (`LOCK_LEASE_LOST`
    /// naming `next` when it is not).
    pub(super) async fn ensure_lock(&mut self, next: Option<&Migration>) -> Result<()> {
        let next = next.map(|m| (m.version, m.name.as_str()));
        self.lock.ensure(self.history.lock_host(), next).await
    }

    /// The connection named `name`: the history connection, or another, opened when first
    /// needed.
    pub(super) async fn connection_named(
        &mut self,
        name: &str,
    ) -> Result<&mut (dyn Backend + 'static)> {
        match name == self.history_connection() {
            true => Ok(self.history.as_mut()),
            false => self.other_connection(name).await,
        }
    }

    pub(super) async fn other_connection(
        &mut self,
        name: &str,
    ) -> Result<&mut (dyn Backend + 'static)> {
        if !self.others.contains_key(name) {
            let backend = (self.migrator)
                .connect(self.connections, name, &self.operation, false)
                .await?;
            self.others.insert(name.to_string(), backend);
        }
        Ok(self.others.get_mut(name).expect("inserted above").as_mut())
    }

    /// Writes history changes planned by `plan` (baseline, resolve, adoption), all in one
    /// batch, after confirming the lock.
    async fn write_records(&mut self, records: &[Recording<'_>]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.ensure_lock(None).await?;
        let changes: Vec<HistoryChange> = records.iter().map(|r| r.change.clone()).collect();
        self.history.record(&changes).await
    }

    pub(super) async fn baseline(
        &mut self,
        available: &[Migration],
        version: i64,
        report: &mut RunReport,
    ) -> Result<()> {
        // A history made by hand records the files, never a baseline.
        let (available, _) = split_baselines(split_repeatables(available).0);
        let applied = self.history.prepare_history().await?;
        let (batch, records) = plan::plan_baseline(available, &applied, version, &self.applied_by)?;
        self.write_records(&records).await?;
        if !records.is_empty() {
            report.batch = Some(batch);
            self.schema_touched = true;
        }
        report.recorded = records.iter().map(|r| self.recorded(r)).collect();
        Ok(())
    }

    pub(super) async fn resolve(
        &mut self,
        available: &[Migration],
        version: i64,
        resolution: Resolution,
        report: &mut RunReport,
    ) -> Result<()> {
        let (versioned, _) = split_repeatables(available);
        let applied = self.history.read_history().await?.unwrap_or_default();
        // What this database follows: a record at a baseline's version is the baseline's.
        let followed = plan::followed(versioned, &applied, None);
        if let Some(baseline) = followed.baseline {
            if baseline.stands_for(version) && version != baseline.version {
                return Err(Error::config(format!(
                    "migration {version} is in the baseline `{}` this database was built from: \
                     it has no record of its own to resolve (the baseline's is {})",
                    baseline.origin, baseline.version
                )));
            }
        }
        let available: Vec<Migration> = followed.migrations.into_iter().cloned().collect();
        let Some(record) = plan::plan_resolution(&available, &applied, version, resolution)? else {
            return Ok(()); // Nothing to accept: the file matches what was applied.
        };
        self.write_records(std::slice::from_ref(&record)).await?;
        self.schema_touched = true;
        report.recorded.push(self.recorded(&record));
        Ok(())
    }

    fn recorded(&self, record: &Recording<'_>) -> StepReport {
        StepReport::new(
            record.version,
            record.name,
            record.direction,
            self.history_connection(),
        )
    }

    pub(super) async fn baseline_from(
        &mut self,
        available: &[Migration],
        source: &AdoptSource,
    ) -> Result<AdoptionReport> {
        // Both histories are read under the lock, so no runner records in between.
        let connection = self.migrator.config.history_connection.as_str();
        let foreign = crate::adopt::read(self.history.as_mut(), connection, source).await?;
        let (versioned, repeatables) = split_repeatables(available);
        let (available, _) = split_baselines(versioned);
        let applied = self.history.read_history().await?.unwrap_or_default();
        let planned = plan::plan_adoption(available, &applied, &foreign)?;
        let adopted = crate::adopt::repeatables(repeatables, &foreign);
        let report =
            AdoptionReport::new(source, &planned, Some(self.strategy())).with_repeatables(&adopted);
        if planned.records.is_empty() && adopted.is_empty() {
            return Ok(report);
        }
        self.history.prepare_history().await?;
        let changes: Vec<HistoryChange> = (planned.records.iter())
            .map(|m| plan::recorded_without_running(m, planned.batch, &self.applied_by))
            .collect();
        self.ensure_lock(None).await?;
        // One transaction on SQL databases: the whole adoption or nothing.
        self.history.record(&changes).await?;
        self.schema_touched = true;
        for repeatable in adopted {
            let change = crate::history::RepeatableChange::Adopted {
                name: repeatable.name.clone(),
                checksum: plan::repeatable_checksum(repeatable),
                applied_by: self.applied_by.clone(),
            };
            self.history.record_repeatable(&change).await?;
        }
        Ok(report)
    }

    /// Releases the lock and closes every connection, whatever `result` is. A release
    /// failure is attached to the command's own error, never substituted for it.
    pub(super) async fn finish<T>(mut self, result: Result<T>) -> Result<T> {
        let result = result.map_err(|e| e.with_completed(std::mem::take(&mut self.completed)));
        let released = self.lock.release(self.history.lock_host()).await;
        let events = &self.migrator.events;
        let connection = self.migrator.config.history_connection.as_str();
        // Said the moment the unlock returned: a waiter may already hold the lock.
        if let Ok(Released::Cleanly) = released {
            events.emit(EventKind::LockReleased {
                lock: LOCK_NAME.to_string(),
                connection: connection.to_string(),
            });
        }
        for (_, backend) in std::mem::take(&mut self.others) {
            backend.close().await;
        }
        // Clean enough for a fleet's next target: the command went well and let go of its lock.
        let reusable =
            result.is_ok() && matches!(released, Ok(Released::Cleanly | Released::NothingHeld));
        self.migrator.release_history(self.history, reusable).await;
        match (result, released) {
            (result, Ok(Released::Cleanly | Released::NothingHeld)) => result,
            (result, Ok(Released::NoLongerOurs(warning))) => {
                events.emit(EventKind::Warning(warning));
                result
            }
            // A lease that could not be deleted lapses by itself: a warning when the run went well.
            (Ok(value), Err(failure)) if failure.lapses_by_itself => {
                events.emit(EventKind::Warning(failure.into_warning()));
                Ok(value)
            }
            (Ok(_), Err(failure)) => Err(failure.into_error(connection)),
            (Err(error), Err(failure)) => Err(error.with_secondary(failure.into_error(connection))),
        }
    }
}

/// What the history of an up-to-date database holds: its files' records, or, once their
/// files are archived after `squash`, a baseline's and the files' after it (a database built
/// from the baseline while the files are still on disk is found up to date by its records).
fn up_to_date(available: &[Migration]) -> Vec<&Migration> {
    let (files, _) = split_baselines(available);
    let new = plan::followed(available, &[], None);
    match new.baseline {
        Some(baseline) if !files.iter().any(|m| m.version <= baseline.version) => new.migrations,
        _ => files.iter().collect(),
    }
}
