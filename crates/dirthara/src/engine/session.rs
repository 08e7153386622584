//! One locked command: its connections, its lock, and the apply loop — the only one.

use std::collections::BTreeMap;
use std::time::Instant;

use super::Migrator;
use super::Resolution;
use crate::adopt::{AdoptSource, AdoptionReport};
use crate::backend::{Backend, BackendKind, StepFailure};
use crate::error::{Error, ErrorKind, Result};
use crate::events::Event;
use crate::history::{runner_identity, HistoryChange, RecordState};
use crate::lock::lease::LeaseGuard;
use crate::lock::{lease_table, Strategy, LOCK_NAME};
use crate::migration::{Direction, Migration, StepFormat};
use crate::plan::{self, Command, Plan, PlannedStep};
use crate::report::{RunReport, StepReport};

/// One locked command's connections and progress.
pub(super) struct Session<'m> {
    pub(super) migrator: &'m Migrator,
    pub(super) operation: String,
    pub(super) history: Box<dyn Backend>,
    /// Connections other than the history connection, opened when a step needs them.
    pub(super) others: BTreeMap<String, Box<dyn Backend>>,
    pub(super) strategy: Strategy,
    /// The held lease, with `Strategy::Lease`.
    pub(super) lease: Option<LeaseGuard>,
    pub(super) completed: Vec<StepReport>,
    /// MySQL/MariaDB: the last step's completion (`applied`, or the deletion after a down
    /// step), not yet written. It goes out with the next step's `running` marker, in one
    /// transaction, or alone when the loop ends however it ends; see [`Session::folds_records`].
    pub(super) unrecorded: Option<HistoryChange>,
}

impl Session<'_> {
    fn table(&self) -> &str {
        &self.migrator.config.history_table
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
        let table = self.table().to_string();
        self.history.prepare_history(&table).await?;
        let applied = self.history.read_history(&table).await?.unwrap_or_default();
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
            report.dropped = self.history.drop_all(&[lease_table(&table)]).await?;
            self.migrator.events.emit(Event::Dropped {
                connection: self.history_connection().to_string(),
                objects: report.dropped.clone(),
            });
            // The lock lives in the session, not in a table, so it survived the drop.
            self.history.prepare_history(&table).await?;
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
    async fn record_unrecorded(&mut self) -> Result<()> {
        match self.unrecorded.take() {
            Some(done) => {
                let table = self.table().to_string();
                self.history.record(&table, &done).await
            }
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
    fn folds_records(&self) -> bool {
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
            let guarded = self.strategy == Strategy::Session
                && step.migration.format != StepFormat::Rust
                && !reverses_nothing(step)
                && self.runs_atomically(step.migration)
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

    /// Confirms the session still holds the lock before changing anything more.
    async fn ensure_lock(&mut self, next: Option<&Migration>) -> Result<()> {
        match self.lock_held().await {
            // A query error means the session is in trouble: we cannot confirm, so stop.
            Ok(true) => Ok(()),
            Ok(false) | Err(_) => Err(self.lock_lost(next)),
        }
    }

    /// Whether the lock is still ours; `Err` when that cannot be told.
    async fn lock_held(&mut self) -> Result<bool> {
        let table = self.table().to_string();
        match self.strategy {
            Strategy::Off => Ok(true),
            Strategy::Session => match self.history.session_lock() {
                Some(lock) => lock.holds_lock(&table).await,
                None => Ok(false),
            },
            Strategy::Lease => match &self.lease {
                Some(lease) => lease.confirm().await,
                None => Ok(false),
            },
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
        match self.lock_held().await {
            Ok(true) => error,
            Ok(false) => self.lock_lost(Some(migration)),
            Err(check) => error.with_secondary(check),
        }
    }

    /// Whether a migration's step and its history record commit in one transaction.
    fn runs_atomically(&self, migration: &Migration) -> bool {
        migration.transactional
            && migration.connection == self.migrator.config.history_connection
            && self.history.transactional_ddl()
    }

    async fn run_step(&mut self, step: &PlannedStep<'_>, batch: i64) -> Result<StepReport> {
        let migration = step.migration;
        let migrator = self.migrator;
        let events = &migrator.events;
        let table = migrator.config.history_table.as_str();
        let on_history = migration.connection == migrator.config.history_connection;
        events.emit(Event::MigrationStarted {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            connection: migration.connection.clone(),
        });
        let started = Instant::now();
        let text = step.text();
        let failed = |failure: StepFailure, left_dirty: bool| {
            Error::new(ErrorKind::MigrationFailed {
                version: migration.version,
                name: migration.name.clone(),
                direction: step.direction,
                connection: migration.connection.clone(),
                error: *failure.error,
                left_dirty,
            })
        };

        let completion = match step.direction {
            Direction::Up => HistoryChange::Insert {
                version: migration.version,
                name: migration.name.clone(),
                checksum: migration.checksum.clone(),
                batch,
                state: RecordState::Applied,
                duration_ms: None,
                applied_by: runner_identity(),
            },
            Direction::Down => HistoryChange::Delete {
                version: migration.version,
            },
        };

        // A Rust migration runs its code where a file migration would send its text.
        let code = match migration.format {
            StepFormat::Rust => Some(migrator.code.get(&migration.version).cloned().ok_or_else(
                || {
                    Error::invalid(
                        &migration.origin,
                        "its Rust code was not registered with this Migrator",
                    )
                },
            )?),
            _ => None,
        };
        let reverses_nothing = reverses_nothing(step);
        let atomic = self.runs_atomically(migration);
        if reverses_nothing || atomic {
            // Only the marker of a bracketed step carries a previous completion.
            self.record_unrecorded().await?;
        }
        if reverses_nothing {
            // A deliberate "this reverses nothing": forget the migration, send nothing.
            self.history.record(table, &completion).await?;
        } else if atomic {
            // The step and its record commit together or not at all.
            let outcome = match &code {
                Some(code) => {
                    self.history
                        .run_code(
                            code.as_ref(),
                            step.direction,
                            true,
                            Some((table, &completion)),
                        )
                        .await
                }
                None => {
                    self.history
                        .run_step_recorded(text, table, &completion)
                        .await
                }
            };
            outcome.map_err(|failure| failed(failure, false))?;
        } else {
            // The step cannot share a transaction with its record: mark it `running` first,
            // so a crash inside it is seen by the next run instead of being re-run or skipped.
            let marker = match step.direction {
                Direction::Up => completion
                    .measured(std::time::Duration::ZERO)
                    .with_state(RecordState::Running),
                Direction::Down => HistoryChange::SetState {
                    version: migration.version,
                    state: RecordState::Running,
                },
            };
            // Open the step's own connection before marking anything: a connection that cannot
            // be reached must not leave a `running` record behind.
            if !on_history {
                self.other_connection(&migration.connection).await?;
            }
            match self.unrecorded.take() {
                Some(done) => self.history.record_all(table, &[done, marker]).await?,
                None => self.history.record(table, &marker).await?,
            }
            let (outcome, transactional_ddl) = if on_history {
                let outcome = match &code {
                    Some(code) => {
                        self.history
                            .run_code(code.as_ref(), step.direction, migration.transactional, None)
                            .await
                    }
                    None => self.history.run_step(text, migration.transactional).await,
                };
                (outcome, self.history.transactional_ddl())
            } else {
                let target = self.other_connection(&migration.connection).await?;
                let transactional_ddl = target.transactional_ddl();
                let outcome = match &code {
                    Some(code) => {
                        target
                            .run_code(code.as_ref(), step.direction, migration.transactional, None)
                            .await
                    }
                    None => target.run_step(text, migration.transactional).await,
                };
                (outcome, transactional_ddl)
            };
            let atomic_step = migration.transactional && transactional_ddl;
            if let Err(failure) = outcome {
                if atomic_step || failure.nothing_changed {
                    // The step rolled back cleanly, or was refused before it changed
                    // anything: take the marker back.
                    let undo = match step.direction {
                        Direction::Up => HistoryChange::Delete {
                            version: migration.version,
                        },
                        Direction::Down => HistoryChange::SetState {
                            version: migration.version,
                            state: RecordState::Applied,
                        },
                    };
                    let error = failed(failure, false);
                    return match self.history.record(table, &undo).await {
                        Ok(()) => Err(error),
                        Err(undo_error) => Err(error.with_secondary(undo_error)),
                    };
                }
                return Err(failed(failure, true));
            }
            let done = match step.direction {
                Direction::Up => HistoryChange::MarkApplied {
                    version: migration.version,
                    duration_ms: started.elapsed().as_millis() as i64,
                },
                Direction::Down => completion,
            };
            if self.folds_records() {
                self.unrecorded = Some(done);
            } else {
                self.history.record(table, &done).await?;
            }
        }

        let duration = started.elapsed();
        events.emit(Event::MigrationFinished {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            duration,
            reverses_nothing,
        });
        Ok(StepReport {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            connection: migration.connection.clone(),
            duration_ms: duration.as_millis() as u64,
            reverses_nothing,
        })
    }

    async fn other_connection(&mut self, name: &str) -> Result<&mut (dyn Backend + 'static)> {
        if !self.others.contains_key(name) {
            let backend = self.migrator.connect(name, &self.operation, false).await?;
            self.others.insert(name.to_string(), backend);
        }
        Ok(self.others.get_mut(name).expect("inserted above").as_mut())
    }

    pub(super) async fn baseline(
        &mut self,
        available: &[Migration],
        version: i64,
        report: &mut RunReport,
    ) -> Result<()> {
        if !available.iter().any(|m| m.version == version) {
            return Err(Error::new(ErrorKind::UnknownVersion { version }));
        }
        let table = self.table().to_string();
        self.history.prepare_history(&table).await?;
        let applied = self.history.read_history(&table).await?.unwrap_or_default();
        if let Some(dirty) = applied.iter().find(|a| a.state == RecordState::Running) {
            return Err(Error::new(ErrorKind::Dirty {
                version: dirty.version,
                name: dirty.name.clone(),
            }));
        }
        let batch = applied.iter().map(|a| a.batch).max().unwrap_or(0) + 1;
        for migration in available.iter().filter(|m| m.version <= version) {
            if applied.iter().any(|a| a.version == migration.version) {
                continue;
            }
            self.ensure_lock(Some(migration)).await?;
            let record = HistoryChange::Insert {
                version: migration.version,
                name: migration.name.clone(),
                checksum: migration.checksum.clone(),
                batch,
                state: RecordState::Applied,
                duration_ms: Some(0),
                applied_by: runner_identity(),
            };
            self.history.record(&table, &record).await?;
            report.batch = Some(batch);
            report.recorded.push(StepReport {
                version: migration.version,
                name: migration.name.clone(),
                direction: Direction::Up,
                connection: migration.connection.clone(),
                duration_ms: 0,
                reverses_nothing: false,
            });
        }
        Ok(())
    }

    pub(super) async fn baseline_from(
        &mut self,
        available: &[Migration],
        source: &AdoptSource,
    ) -> Result<AdoptionReport> {
        let table = self.table().to_string();
        // Both histories are read under the lock, so no runner records in between.
        let foreign = crate::adopt::read(self.history.as_mut(), source).await?;
        let applied = self.history.read_history(&table).await?.unwrap_or_default();
        let planned = plan::plan_adoption(available, &applied, &foreign)?;
        let report = AdoptionReport::new(source, &planned, self.strategy.name());
        if planned.records.is_empty() {
            return Ok(report);
        }
        self.history.prepare_history(&table).await?;
        let applied_by = runner_identity();
        let changes: Vec<HistoryChange> = (planned.records.iter())
            .map(|m| HistoryChange::Insert {
                version: m.version,
                name: m.name.clone(),
                checksum: m.checksum.clone(),
                batch: planned.batch,
                state: RecordState::Applied,
                duration_ms: Some(0),
                applied_by: applied_by.clone(),
            })
            .collect();
        self.ensure_lock(None).await?;
        crate::adopt::record_all(self.history.as_mut(), &table, &changes).await?;
        Ok(report)
    }

    pub(super) async fn resolve(
        &mut self,
        available: &[Migration],
        version: i64,
        resolution: Resolution,
        report: &mut RunReport,
    ) -> Result<()> {
        let table = self.table().to_string();
        let applied = self.history.read_history(&table).await?.unwrap_or_default();
        let Some(record) = applied.iter().find(|a| a.version == version) else {
            return Err(Error::config(format!(
                "migration {version} has no history record, so there is nothing to resolve \
                 (`dirthara status` shows the recorded migrations)"
            )));
        };
        let dirty = record.state == RecordState::Running;
        let change = match resolution {
            Resolution::Applied | Resolution::RolledBack if !dirty => {
                return Err(Error::config(format!(
                    "migration {version} ({}) is not dirty (it is recorded as applied); \
                     `resolve --applied/--rolled-back` only clears a migration a failed run left running",
                    record.name
                )))
            }
            Resolution::Applied => HistoryChange::MarkApplied {
                version,
                duration_ms: record.duration_ms,
            },
            Resolution::RolledBack => HistoryChange::Delete { version },
            Resolution::AcceptChecksum => {
                let Some(migration) = available.iter().find(|m| m.version == version) else {
                    return Err(Error::new(ErrorKind::MissingMigration {
                        version,
                        name: record.name.clone(),
                    }));
                };
                if dirty {
                    return Err(Error::new(ErrorKind::Dirty {
                        version,
                        name: record.name.clone(),
                    }));
                }
                if migration.checksum == record.checksum {
                    // Nothing to accept: the file matches what was applied.
                    return Ok(());
                }
                HistoryChange::SetChecksum {
                    version,
                    checksum: migration.checksum.clone(),
                }
            }
        };
        self.ensure_lock(None).await?;
        self.history.record(&table, &change).await?;
        report.recorded.push(StepReport {
            version,
            name: record.name.clone(),
            direction: if resolution == Resolution::RolledBack {
                Direction::Down
            } else {
                Direction::Up
            },
            connection: self.history_connection().to_string(),
            duration_ms: 0,
            reverses_nothing: false,
        });
        Ok(())
    }

    /// Releases the lock and closes every connection, whatever `result` is. A release
    /// failure is attached to the command's own error, never substituted for it.
    pub(super) async fn finish<T>(mut self, result: Result<T>) -> Result<T> {
        let result = result.map_err(|e| e.with_completed(std::mem::take(&mut self.completed)));
        let release = match self.strategy {
            Strategy::Off => Ok(()),
            Strategy::Lease => {
                let warning = match self.lease.take() {
                    Some(lease) => lease.release().await,
                    None => None,
                };
                match warning {
                    // Released, or lapsed (a warning: the run's own result stands).
                    None => {
                        self.migrator.events.emit(Event::LockReleased {
                            lock: LOCK_NAME.to_string(),
                            connection: self.history_connection().to_string(),
                        });
                        Ok(())
                    }
                    Some(warning)
                        if warning.code == crate::Code::LockLeaseExpired || result.is_ok() =>
                    {
                        self.migrator.events.emit(Event::Warning(warning));
                        Ok(())
                    }
                    // A failed release after a failed run: attached to the run's error.
                    Some(warning) => Err(Error::new(ErrorKind::LockFailed {
                        lock: LOCK_NAME.to_string(),
                        connection: self.history_connection().to_string(),
                        reason: warning.message,
                    })),
                }
            }
            Strategy::Session => {
                let table = self.table().to_string();
                let connection = self.history_connection().to_string();
                let released = match self.history.session_lock() {
                    Some(lock) => lock.unlock(&table).await,
                    None => Ok(()),
                };
                match released {
                    Ok(()) => {
                        self.migrator.events.emit(Event::LockReleased {
                            lock: LOCK_NAME.to_string(),
                            connection,
                        });
                        Ok(())
                    }
                    Err(error) => Err(Error::new(ErrorKind::LockFailed {
                        lock: LOCK_NAME.to_string(),
                        connection,
                        reason: format!(
                            "releasing the lock failed ({error}); the database releases it when \
                             this session ends, which happens now"
                        ),
                    })),
                }
            }
        };
        for (_, backend) in std::mem::take(&mut self.others) {
            backend.close().await;
        }
        self.history.close().await;
        match (result, release) {
            (Ok(value), Ok(())) => Ok(value),
            (Ok(_), Err(release_error)) => Err(release_error),
            (Err(error), Ok(())) => Err(error),
            (Err(error), Err(release_error)) => Err(error.with_secondary(release_error)),
        }
    }
}

/// A down step that is empty or only comments.
fn reverses_nothing(step: &PlannedStep<'_>) -> bool {
    step.direction == Direction::Down && step.migration.down_is_blank
}

impl HistoryChange {
    fn with_state(mut self, new_state: RecordState) -> Self {
        if let HistoryChange::Insert { state, .. } = &mut self {
            *state = new_state;
        }
        self
    }
}
