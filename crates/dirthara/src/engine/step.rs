//! One migration's step with its history records: atomically where the database allows,
//! else bracketed by a `running` marker so a crash inside it is seen by the next run.

use std::time::Instant;

use super::session::Session;
use crate::backend::{Step, StepBody, StepFailure};
use crate::error::{Error, ErrorKind, Result};
use crate::events::Event;
use crate::history::{HistoryChange, RecordState};
use crate::migration::{Direction, StepFormat};
use crate::plan::PlannedStep;
use crate::report::StepReport;

impl Session<'_> {
    pub(super) async fn run_step(
        &mut self,
        step: &PlannedStep<'_>,
        batch: i64,
    ) -> Result<StepReport> {
        let migration = step.migration;
        let migrator = self.migrator;
        let on_history = migration.connection == migrator.config.history_connection;
        migrator.events.emit(Event::MigrationStarted {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            connection: migration.connection.clone(),
        });
        let started = Instant::now();
        let failed = |failure: StepFailure, left_dirty: bool| {
            Error::new(ErrorKind::MigrationFailed {
                version: migration.version,
                name: migration.name.clone(),
                direction: step.direction,
                connection: migration.connection.clone(),
                error: *failure.error,
                left_dirty,
                transactional: step.transactional(),
            })
        };
        let completion = match step.direction {
            Direction::Up => HistoryChange::Insert {
                version: migration.version,
                name: migration.name.clone(),
                checksum: migration.checksum().to_string(),
                batch,
                state: RecordState::Applied,
                duration_ms: None,
                applied_by: self.applied_by.clone(),
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
        let body = match &code {
            Some(code) => StepBody::Code(code.as_ref(), step.direction),
            None => StepBody::Text(step.text()),
        };
        let reverses_nothing = step.reverses_nothing();
        let atomic = self.runs_atomically(step);

        if reverses_nothing || atomic {
            // Only the marker of a bracketed step carries a previous completion.
            self.record_unrecorded().await?;
        }
        if reverses_nothing {
            // A deliberate "this reverses nothing": forget the migration, send nothing.
            self.history.record(&[completion]).await?;
        } else if atomic {
            // The step and its record commit together or not at all.
            let ran = self.history.run(Step {
                body,
                transactional: true,
                record: Some(&completion),
            });
            ran.await.map_err(|failure| failed(failure, false))?;
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
            let markers: Vec<HistoryChange> =
                self.unrecorded.take().into_iter().chain([marker]).collect();
            self.history.record(&markers).await?;
            let alone = Step {
                body,
                transactional: step.transactional(),
                record: None,
            };
            let target = match on_history {
                true => self.history.as_mut(),
                false => self.other_connection(&migration.connection).await?,
            };
            let atomic_step = step.transactional() && target.transactional_ddl();
            if let Err(failure) = target.run(alone).await {
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
                    return match self.history.record(&[undo]).await {
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
                self.history.record(&[done]).await?;
            }
        }

        let duration = started.elapsed();
        migrator.events.emit(Event::MigrationFinished {
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
}

impl HistoryChange {
    fn with_state(mut self, new_state: RecordState) -> Self {
        if let HistoryChange::Insert { state, .. } = &mut self {
            *state = new_state;
        }
        self
    }
}
