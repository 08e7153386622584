//! One locked command: its connections, its lock, and the apply loop — the only one.

use std::collections::BTreeMap;

use super::Migrator;
use crate::adopt::{AdoptSource, AdoptionReport};
use crate::backend::{Backend, BackendKind};
use crate::error::{Error, ErrorKind, Result};
use crate::events::Event;
use crate::history::{runner_identity, HistoryChange};
use crate::lock::{self, HeldLock, Released, Strategy, Waiting};
use crate::lock::{lease_table, LOCK_NAME};
use crate::migration::{Direction, Migration, StepFormat};
use crate::plan::{self, Command, Plan, PlannedStep, Recording, Resolution};
use crate::report::{RunReport, StepReport};

/// One locked command's connections and progress. Ended only by [`Session::finish`], which
/// releases the lock and closes every connection whatever happened; if it is dropped instead
/// (its future abandoned), the lock still goes: the session lock with its connection, the
/// lease with its heartbeat.
pub(super) struct Session<'m> {
    pub(super) migrator: &'m Migrator,
    pub(super) operation: String,
    pub(super) history: Box<dyn Backend>,
    /// Connections other than the history connection, opened when a step needs them.
    pub(super) others: BTreeMap<String, Box<dyn Backend>>,
    lock: HeldLock,
    pub(super) completed: Vec<StepReport>,
    /// MySQL/MariaDB: the last step's completion (`applied`, or the deletion after a down
    /// step), not yet written. It goes out with the next step's `running` marker, in one
    /// transaction, or alone when the loop ends however it ends; see [`Session::folds_records`].
    pub(super) unrecorded: Option<HistoryChange>,
    /// `host:pid dirthara/x.y.z`, written into every record this session makes: asked of the
    /// system once, not once per migration.
    pub(super) applied_by: String,
}

impl<'m> Session<'m> {
    /// Takes the lock on the history connection: the first thing done on the database. The
    /// configuration was validated and `strategy` resolved by the caller.
    pub(super) async fn open(
        migrator: &'m Migrator,
        operation: &str,
        strategy: Strategy,
        mut history: Box<dyn Backend>,
    ) -> Result<Session<'m>> {
        let config = &migrator.config;
        let connection = config.history_connection.as_str();
        let waiting = Waiting {
            connection,
            wait: config.lock_wait.unwrap_or(strategy.default_wait()),
            events: &migrator.events,
            shutdown: migrator.shutdown.as_ref(),
            operation,
            lease_ttl: config.lock_ttl,
        };
        let acquired = match migrator.lock_primitive(history.as_mut(), strategy).await {
            Ok(primitive) => lock::acquire(primitive, &waiting).await,
            Err(error) => Err(error),
        };
        match acquired {
            Ok(lock) => Ok(Session {
                migrator,
                operation: operation.to_string(),
                history,
                others: BTreeMap::new(),
                lock,
                completed: Vec::new(),
                unrecorded: None,
                applied_by: runner_identity(),
            }),
            Err(error) => {
                history.close().await;
                Err(error)
            }
        }
    }

    pub(super) fn strategy(&self) -> Strategy {
        self.lock.strategy()
    }

    fn history_connection(&self) -> &str {
        &self.migrator.config.history_connection
    }

    pub(super) async fn run_command(
        &mut self,
        available: &[Migration],
        command: Command,
        report: &mut RunReport,
    ) -> Result<()> {
        let applied = self.history.prepare_history().await?;
        let planned = plan::plan(available, &applied, command, self.migrator.plan_options())?;
        for warning in &planned.warnings {
            self.migrator.events.emit(Event::Warning(warning.clone()));
        }
        self.migrator.events.emit(Event::Planned {
            operation: command.name().to_string(),
            steps: planned.steps.len(),
        });
        report.warnings.extend(planned.warnings.iter().cloned());
        if planned.drop_all {
            self.ensure_lock(None).await?;
            // Never the lease table: a lease may be what protects this very run.
            let keep = [lease_table(&self.migrator.config.history_table)];
            report.dropped = self.history.drop_all(&keep).await?;
            self.migrator.events.emit(Event::Dropped {
                connection: self.history_connection().to_string(),
                objects: report.dropped.clone(),
            });
            // The lock lives in the session, not in a table, so it survived the drop.
            self.history.prepare_history().await?;
        }
        self.apply(&planned, report).await
    }

    async fn apply(&mut self, planned: &Plan<'_>, report: &mut RunReport) -> Result<()> {
        let applied = self.apply_steps(planned, report).await;
        // Whatever ended the loop, the last completed step's record is written before the
        // command returns (a failure here leaves that one step `running`: dirty, never lost).
        let flushed = self.record_unrecorded().await;
        match (applied, flushed) {
            (Ok(()), flushed) => flushed,
            (Err(error), Ok(())) => Err(error),
            (Err(error), Err(flush_error)) => Err(error.with_secondary(flush_error)),
        }
    }

    /// Writes the completion left for the next marker, if any.
    pub(super) async fn record_unrecorded(&mut self) -> Result<()> {
        match self.unrecorded.take() {
            Some(done) => self.history.record(&[done]).await,
            None => Ok(()),
        }
    }

    /// Whether a step's completion waits for the next step's marker. On MySQL/MariaDB every
    /// history write is a commit of its own (a log flush), and no step shares a transaction
    /// with its record (DDL commits implicitly), so each migration would cost a `running`
    /// commit and an `applied` commit. Writing migration N's completion together with N+1's
    /// `running` marker, in one transaction, halves that. Dirty detection is unchanged: the
    /// pair commits together, so the history moves from "N running" straight to "N applied,
    /// N+1 running" — one `running` record at most, at any instant; a crash before the pair is
    /// written leaves N `running`, which the next run reports as it would any interrupted step.
    pub(super) fn folds_records(&self) -> bool {
        self.history.kind() == BackendKind::Mysql
    }

    async fn apply_steps(&mut self, planned: &Plan<'_>, report: &mut RunReport) -> Result<()> {
        for (index, step) in planned.steps.iter().enumerate() {
            if self.interrupted() {
                return Err(Error::new(ErrorKind::Interrupted {
                    remaining: planned.steps[index..]
                        .iter()
                        .map(|s| (s.migration.version, s.migration.name.clone()))
                        .collect(),
                }));
            }
            // Where the database checks the lock inside the step's own transaction (PostgreSQL),
            // a separate check first would only cost a round trip.
            let guarded = self.strategy() == Strategy::Session
                && step.migration.format != StepFormat::Rust
                && !step.reverses_nothing()
                && self.runs_atomically(step)
                && self
                    .history
                    .session_lock()
                    .is_some_and(|lock| lock.verifies_in_step());
            if !guarded {
                self.ensure_lock(Some(step.migration)).await?;
            }
            let running = self.run_step(step, planned.batch);
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
            let done = match running.await {
                Ok(done) => done,
                // The guard rolls the step back when the lock is gone: say that, not "failed".
                Err(error) if guarded => {
                    return Err(self.explain_guarded_failure(error, step.migration).await)
                }
                Err(error) => return Err(error),
            };
            match step.direction {
                Direction::Up => {
                    report.batch = Some(planned.batch);
                    report.applied.push(done.clone());
                }
                Direction::Down => report.reverted.push(done.clone()),
            }
            self.completed.push(done);
        }
        Ok(())
    }

    fn interrupted(&self) -> bool {
        self.migrator
            .shutdown
            .as_ref()
            .is_some_and(|rx| *rx.borrow())
    }

    /// Confirms the lock is still ours before changing anything more.
    pub(super) async fn ensure_lock(&mut self, next: Option<&Migration>) -> Result<()> {
        match self.lock.confirm(self.history.session_lock()).await {
            // A query error means the session is in trouble: we cannot confirm, so stop.
            Ok(true) => Ok(()),
            Ok(false) | Err(_) => Err(self.lock_lost(next)),
        }
    }

    fn lock_lost(&self, next: Option<&Migration>) -> Error {
        Error::new(ErrorKind::LockLost {
            lock: LOCK_NAME.to_string(),
            connection: self.history_connection().to_string(),
            next: next.map(|m| (m.version, m.name.clone())),
        })
    }

    /// A step whose message carried the lock check failed: either the step itself failed,
    /// or the check did because the lock is gone. Only a lock known to be gone is reported
    /// as lost; otherwise the step's own error stands, with a failed check attached under it.
    async fn explain_guarded_failure(&mut self, error: Error, migration: &Migration) -> Error {
        match error.kind() {
            ErrorKind::MigrationFailed { error: db, .. } if !db.connection_lost => {}
            // A dead session can be asked nothing more; other errors are not the step's.
            _ => return error,
        }
        match self.lock.confirm(self.history.session_lock()).await {
            Ok(true) => error,
            Ok(false) => self.lock_lost(Some(migration)),
            Err(check) => error.with_secondary(check),
        }
    }

    /// Whether a migration's step and its history record commit in one transaction.
    pub(super) fn runs_atomically(&self, step: &PlannedStep) -> bool {
        step.transactional()
            && step.migration.connection == self.migrator.config.history_connection
            && self.history.transactional_ddl()
    }

    pub(super) async fn other_connection(
        &mut self,
        name: &str,
    ) -> Result<&mut (dyn Backend + 'static)> {
        if !self.others.contains_key(name) {
            let backend = self.migrator.connect(name, &self.operation, false).await?;
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
        let applied = self.history.prepare_history().await?;
        let (batch, records) = plan::plan_baseline(available, &applied, version, &self.applied_by)?;
        self.write_records(&records).await?;
        if !records.is_empty() {
            report.batch = Some(batch);
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
        let applied = self.history.read_history().await?.unwrap_or_default();
        let Some(record) = plan::plan_resolution(available, &applied, version, resolution)? else {
            return Ok(()); // Nothing to accept: the file matches what was applied.
        };
        self.write_records(std::slice::from_ref(&record)).await?;
        report.recorded.push(self.recorded(&record));
        Ok(())
    }

    fn recorded(&self, record: &Recording<'_>) -> StepReport {
        StepReport {
            version: record.version,
            name: record.name.to_string(),
            direction: record.direction,
            connection: self.history_connection().to_string(),
            duration_ms: 0,
            reverses_nothing: false,
        }
    }

    pub(super) async fn baseline_from(
        &mut self,
        available: &[Migration],
        source: &AdoptSource,
    ) -> Result<AdoptionReport> {
        // Both histories are read under the lock, so no runner records in between.
        let connection = self.migrator.config.history_connection.as_str();
        let foreign = crate::adopt::read(self.history.as_mut(), connection, source).await?;
        let applied = self.history.read_history().await?.unwrap_or_default();
        let planned = plan::plan_adoption(available, &applied, &foreign)?;
        let report = AdoptionReport::new(source, &planned, Some(self.strategy()));
        if planned.records.is_empty() {
            return Ok(report);
        }
        self.history.prepare_history().await?;
        let changes: Vec<HistoryChange> = (planned.records.iter())
            .map(|m| plan::recorded_without_running(m, planned.batch, &self.applied_by))
            .collect();
        self.ensure_lock(None).await?;
        // One transaction on SQL databases: the whole adoption or nothing.
        self.history.record(&changes).await?;
        Ok(report)
    }

    /// Releases the lock and closes every connection, whatever `result` is. A release
    /// failure is attached to the command's own error, never substituted for it.
    pub(super) async fn finish<T>(mut self, result: Result<T>) -> Result<T> {
        let result = result.map_err(|e| e.with_completed(std::mem::take(&mut self.completed)));
        let strategy = self.lock.strategy();
        let released = self.lock.release(self.history.session_lock()).await;
        for (_, backend) in std::mem::take(&mut self.others) {
            backend.close().await;
        }
        self.history.close().await;
        let events = &self.migrator.events;
        let connection = self.migrator.config.history_connection.as_str();
        let lock_released = || Event::LockReleased {
            lock: LOCK_NAME.to_string(),
            connection: connection.to_string(),
        };
        match (result, released) {
            (result, Ok(Released::Cleanly)) => {
                if strategy != Strategy::Off {
                    events.emit(lock_released());
                }
                result
            }
            (result, Ok(Released::NoLongerOurs(warning))) => {
                events.emit(Event::Warning(warning));
                result
            }
            // A lease that could not be deleted lapses by itself: a warning when the run went well.
            (Ok(value), Err(failure)) if failure.lapses_by_itself => {
                events.emit(Event::Warning(failure.into_warning()));
                Ok(value)
            }
            (Ok(_), Err(failure)) => Err(failure.into_error(connection)),
            (Err(error), Err(failure)) => Err(error.with_secondary(failure.into_error(connection))),
        }
    }
}
