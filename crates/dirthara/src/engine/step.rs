//! One migration's step with its history records: atomically where the database allows,
//! else bracketed by a `running` marker so a crash inside it is seen by the next run.
//!
//! A step runs in three parts, so that what happens between them (confirming the lock,
//! retrying an attempt) is the engine's to decide: [`Session::mark`] prepares the records
//! that must exist before it runs, [`Session::attempt`] runs it once (`engine/attempts.rs`
//! tries again one that gave way to the application's table locks), and
//! [`Session::settle`] writes what its outcome means for the history.

use std::time::Instant;

use super::bracket::{bracket_of, Bracket};
use super::session::{Session, Unrecorded};
use crate::backend::{Step, StepBody, StepFailure};
use crate::error::{Error, ErrorKind, Result};
use crate::events::EventKind;
use crate::history::{HistoryChange, NewRecord, RecordState};
use crate::lock::LockCheck;
use crate::migration::{Direction, Migration, StepFormat};
use crate::plan::PlannedStep;
use crate::report::StepReport;
use crate::rust_migration::RustMigration;

#[cfg(feature = "failpoints")]
mod planted;

/// A step made ready to run: what it runs, where, and the records around it.
pub(super) struct Prepared<'p> {
    pub migration: &'p Migration,
    pub direction: Direction,
    pub text: &'p str,
    code: Option<std::sync::Arc<dyn RustMigration>>,
    pub bracket: Bracket,
    /// The step asked for a transaction of its own.
    pub transactional: bool,
    /// Runs on the history connection (else on the migration's own connection).
    pub on_history: bool,
    /// What the history says once the step is done: its `applied` record, or (down) the
    /// record's removal.
    completion: HistoryChange,
    started: Instant,
}

/// How a step's attempts ended.
pub(super) enum Attempt {
    Done,
    /// It failed on its own (or gave way where it is never retried).
    Failed(StepFailure),
    /// Every attempt gave way to the application's table locks until the budget ran out.
    GaveUp {
        failure: StepFailure,
        attempts: u32,
        spent: std::time::Duration,
    },
    /// A shutdown signal came between attempts.
    Stopped(StepFailure),
    /// The migration lock was gone when confirmed before another attempt.
    LockLost(StepFailure, Error),
}

impl<'p> Prepared<'p> {
    fn body(&self) -> StepBody<'_> {
        match &self.code {
            Some(code) => StepBody::Code(code.as_ref(), self.direction),
            None => StepBody::Text(self.text, self.migration.parsed_in(self.direction)),
        }
    }

    /// The backend located the error in the step's text; the file may hold more (a dbmate or
    /// goose section), so the error says where it is in the file.
    fn locate(&self, failure: &mut StepFailure) {
        let source = self.migration.source_of(self.direction);
        if let (Some(line), None) = (failure.error.line, &failure.error.file) {
            failure.error.line = Some(source.file_line(line));
            failure.error.file = Some(source.file.clone());
        }
    }

    /// What the run reports of the step once it is done.
    fn report(&self) -> StepReport {
        let migration = self.migration;
        let mut report = StepReport::new(
            migration.version,
            &migration.name,
            self.direction,
            &migration.connection,
        );
        report.duration_ms = self.started.elapsed().as_millis() as u64;
        report.reverses_nothing = self.bracket == Bracket::RecordOnly;
        report
    }

    /// The error a step's attempts end with when they did not succeed.
    fn error(&self, attempt: Attempt, left_dirty: bool) -> Error {
        let migration = self.migration;
        let located = |mut failure: StepFailure| {
            self.locate(&mut failure);
            *failure.error
        };
        match attempt {
            Attempt::Done => unreachable!("a step that succeeded has no error"),
            Attempt::Failed(failure) => Error::new(ErrorKind::MigrationFailed {
                version: migration.version,
                name: migration.name.clone(),
                direction: self.direction,
                connection: migration.connection.clone(),
                error: located(failure),
                left_dirty,
                transactional: self.transactional,
                repeatable: false,
            }),
            Attempt::GaveUp {
                failure,
                attempts,
                spent,
            } => Error::new(ErrorKind::TableLockTimeout {
                version: migration.version,
                name: migration.name.clone(),
                direction: self.direction,
                connection: migration.connection.clone(),
                error: located(failure),
                attempts,
                spent,
                left_dirty,
            }),
            // The rest of the plan is the caller's to name.
            Attempt::Stopped(_) => Error::new(ErrorKind::Interrupted {
                remaining: vec![(migration.version, migration.name.clone())],
            }),
            Attempt::LockLost(_, lost) => lost,
        }
    }
}

impl Session<'_> {
    /// Runs one planned step with its records: marked, attempted once, settled. `check` says
    /// whether the step carries the lock check itself (else the caller confirmed it).
    pub(super) async fn run_step(
        &mut self,
        step: &PlannedStep<'_>,
        batch: i64,
        check: LockCheck,
    ) -> Result<()> {
        let migration = step.migration;
        let events = &self.migrator.events;
        events.emit(EventKind::MigrationStarted {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            connection: migration.connection.clone(),
        });
        let prepared = self.prepare(step, batch)?;
        #[cfg(feature = "failpoints")]
        if let Some(pause) = planted::record_after(&prepared) {
            return self.run_then_record(&prepared, check, pause).await;
        }
        self.mark(&prepared, check).await?;
        let attempt = self.attempts(&prepared, check).await;
        let pending = self.settle(&prepared, attempt).await?;
        let report = prepared.report();
        match pending {
            // Done once its record is written, with the next step's marker.
            Some(change) => self.unrecorded = Some(Unrecorded { change, report }),
            None => self.completed_step(report),
        }
        Ok(())
    }

    /// What `step` runs and how its records bracket it; nothing is sent yet.
    pub(super) fn prepare<'p>(&self, step: &PlannedStep<'p>, batch: i64) -> Result<Prepared<'p>> {
        let migration = step.migration;
        let migrator = self.migrator;
        let completion = match step.direction {
            Direction::Up => HistoryChange::Insert(NewRecord {
                version: migration.version,
                name: migration.name.clone(),
                checksum: migration.checksum().to_string(),
                batch,
                state: RecordState::Applied,
                duration_ms: None,
                applied_by: self.applied_by.clone(),
            }),
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
        let bracket = bracket_of(
            step,
            &migrator.config.history_connection,
            &self.history.capabilities(),
        );
        Ok(Prepared {
            migration,
            direction: step.direction,
            text: migration
                .step(step.direction)
                .expect("the planner only plans down steps that exist"),
            code,
            bracket,
            transactional: step.transactional(),
            on_history: migration.connection == migrator.config.history_connection,
            completion,
            started: Instant::now(),
        })
    }

    /// Writes what must be in the history before the step runs: its `running` marker when
    /// it is bracketed by one (together with the previous step's completion, if that was
    /// left for it); else the previous completion alone, so that it is not folded into a
    /// record this step commits with. With [`LockCheck::InMarker`], the marker is written
    /// only while the lock is still ours (`LOCK_LEASE_LOST` when it is not: the previous
    /// completion is written, nothing of this step is).
    pub(super) async fn mark(&mut self, prepared: &Prepared<'_>, check: LockCheck) -> Result<()> {
        if prepared.bracket != Bracket::Marked {
            return self.record_unrecorded().await;
        }
        let migration = prepared.migration;
        let marker = match prepared.direction {
            Direction::Up => prepared
                .completion
                .measured(std::time::Duration::ZERO)
                .with_state(RecordState::Running),
            Direction::Down => HistoryChange::SetState {
                version: migration.version,
                state: RecordState::Running,
            },
        };
        // Open the step's own connection before marking anything: a connection that cannot
        // be reached must not leave a `running` record behind.
        if !prepared.on_history {
            self.other_connection(&migration.connection).await?;
        }
        let previous = self.unrecorded.take();
        let markers: Vec<HistoryChange> = (previous.iter())
            .map(|p| p.change.clone())
            .chain([marker])
            .collect();
        let held = match check {
            LockCheck::InMarker => self.history.record_guarded(&markers).await?,
            LockCheck::Before | LockCheck::InStep => {
                self.history.record(&markers).await?;
                true
            }
        };
        if let Some(previous) = previous {
            self.completed_step(previous.report);
        }
        match held {
            true => Ok(()),
            false => Err(self.lock.lost(Some((migration.version, &migration.name)))),
        }
    }

    /// Runs the step once. `check` says whether it carries the lock check itself;
    /// `lock_timeout` and `resume_at` are the attempt's ([`Step`]).
    pub(super) async fn attempt(
        &mut self,
        prepared: &Prepared<'_>,
        check: LockCheck,
        lock_timeout: Option<std::time::Duration>,
        resume_at: usize,
    ) -> Attempt {
        let outcome = match prepared.bracket {
            Bracket::RecordOnly => Ok(()),
            Bracket::Atomic => {
                let step = Step {
                    body: prepared.body(),
                    transactional: true,
                    record: Some(&prepared.completion),
                    checks_lock: check == LockCheck::InStep,
                    lock_timeout,
                    resume_at: 0,
                };
                self.history.run(step).await
            }
            Bracket::Marked => {
                let step = Step {
                    body: prepared.body(),
                    transactional: prepared.transactional,
                    record: None,
                    checks_lock: false,
                    lock_timeout,
                    resume_at,
                };
                match self.step_connection(prepared).await {
                    Ok(target) => target.run(step).await,
                    // Opened before the marker was written, so not expected; if it happens,
                    // nothing ran.
                    Err(error) => Err(StepFailure::refused(error.to_string())),
                }
            }
        };
        match outcome {
            Ok(()) => Attempt::Done,
            Err(failure) => Attempt::Failed(failure),
        }
    }

    /// Writes what the attempt's outcome means for the history, and turns a failure into
    /// the step's error: left `running` (dirty) only when something may have committed.
    /// Returns the completion still to write where the database folds it into the next
    /// step's marker.
    pub(super) async fn settle(
        &mut self,
        prepared: &Prepared<'_>,
        attempt: Attempt,
    ) -> Result<Option<HistoryChange>> {
        let migration = prepared.migration;
        match (prepared.bracket, attempt) {
            (Bracket::RecordOnly, _) => {
                self.history
                    .record(std::slice::from_ref(&prepared.completion))
                    .await?;
                Ok(None)
            }
            // The record committed with the step, or neither did.
            (Bracket::Atomic, Attempt::Done) => Ok(None),
            (Bracket::Atomic, ended) => Err(prepared.error(ended, false)),
            (Bracket::Marked, Attempt::Done) => {
                let done = match prepared.direction {
                    Direction::Up => HistoryChange::MarkApplied {
                        version: migration.version,
                        duration_ms: prepared.started.elapsed().as_millis() as i64,
                    },
                    Direction::Down => prepared.completion.clone(),
                };
                if self.history.capabilities().folds_records {
                    Ok(Some(done))
                } else {
                    self.history.record(&[done]).await?;
                    Ok(None)
                }
            }
            (Bracket::Marked, ended) => {
                let failure = match &ended {
                    Attempt::Failed(f) | Attempt::Stopped(f) | Attempt::LockLost(f, _) => f,
                    Attempt::GaveUp { failure, .. } => failure,
                    Attempt::Done => unreachable!("matched above"),
                };
                // The backend knows what committed: a step rolled back whole, a first
                // statement that undid itself, a command refused before it ran.
                if !failure.nothing_changed {
                    return Err(self.left_dirty(prepared, ended).await);
                }
                // Nothing of the step stayed: take the marker back.
                let undo = match prepared.direction {
                    Direction::Up => HistoryChange::Delete {
                        version: migration.version,
                    },
                    Direction::Down => HistoryChange::SetState {
                        version: migration.version,
                        state: RecordState::Applied,
                    },
                };
                let error = prepared.error(ended, false);
                match self.history.record(&[undo]).await {
                    Ok(()) => Err(error),
                    Err(undo_error) => Err(error.with_secondary(undo_error)),
                }
            }
        }
    }

    /// A step that failed after something may have committed: its `running` record stays,
    /// and keeps the error, so the next run (and `status`) can say why it is dirty. If even
    /// that cannot be written (the connection is gone), the record stays without it.
    async fn left_dirty(&mut self, prepared: &Prepared<'_>, mut ended: Attempt) -> Error {
        let failure = match &mut ended {
            Attempt::Failed(f) | Attempt::Stopped(f) | Attempt::LockLost(f, _) => f,
            Attempt::GaveUp { failure, .. } => failure,
            Attempt::Done => unreachable!("a step that succeeded is not dirty"),
        };
        prepared.locate(failure);
        let why = HistoryChange::RecordFailure {
            version: prepared.migration.version,
            failure: failure.error.recorded(),
        };
        let kept = self.history.record(&[why]).await;
        let error = prepared.error(ended, true);
        match kept {
            Ok(()) => error,
            Err(not_kept) => error.with_secondary(not_kept),
        }
    }

    /// The connection the step runs on: the history connection, or its own.
    pub(super) async fn step_connection(
        &mut self,
        prepared: &Prepared<'_>,
    ) -> Result<&mut (dyn crate::backend::Backend + 'static)> {
        match prepared.on_history {
            true => Ok(self.history.as_mut()),
            false => self.other_connection(&prepared.migration.connection).await,
        }
    }
}
