//! Repeatable migrations (`R__<name>.sql`): applied after every versioned step of the run,
//! under the same lock, in name order, each whose text (placeholders filled in) is not the
//! one last applied for its name — every one in `refresh` and `fresh`.
//!
//! Each runs on the history connection, in a transaction of its own where the database has
//! transactional DDL (and the file does not say `no-transaction`), bracketed by its record:
//! `running` with the new checksum before it is sent, `applied` once it ran. A run that fails
//! or dies in between leaves the record `running`, and the next `migrate` applies it again:
//! a repeatable is written to be run again (`CREATE OR REPLACE`), so nothing is left dirty
//! for an operator to resolve. It is tried once: a statement that waits longer than the
//! table-lock timeout gives way and fails the run, keeping the application unblocked.

use std::time::Instant;

use super::attempts::giving_of;
use super::bracket::Bracket;
use super::session::Session;
use crate::backend::{Step, StepBody, StepFailure};
use crate::error::{Error, ErrorKind, Result};
use crate::events::EventKind;
use crate::history::RepeatableChange;
use crate::migration::{Direction, Migration};
use crate::plan::retry::Giving;
use crate::plan::{repeatable_checksum, repeatables_to_apply};
use crate::report::{RunReport, StepReport};

impl Session<'_> {
    /// Applies the repeatables that are due (`every`: all of them), after the run's
    /// versioned steps; each applied one is added to `report.applied`.
    pub(super) async fn apply_repeatables(
        &mut self,
        files: &[Migration],
        every: bool,
        report: &mut RunReport,
    ) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        let records = self.history.read_repeatables().await?;
        let due = repeatables_to_apply(files, &records, every);
        for (index, repeatable) in due.iter().enumerate() {
            if self.interrupted() {
                let remaining = (due[index..].iter())
                    .map(|r| (r.version, format!("R__{}", r.name)))
                    .collect();
                return Err(Error::new(ErrorKind::Interrupted { remaining }));
            }
            let done = self.apply_repeatable(repeatable).await?;
            report.applied.push(done.clone());
            self.completed_step(done);
        }
        Ok(())
    }

    async fn apply_repeatable(&mut self, repeatable: &Migration) -> Result<StepReport> {
        let name = repeatable.name.clone();
        self.ensure_lock(None).await?;
        let running = RepeatableChange::Running {
            name: name.clone(),
            checksum: repeatable_checksum(repeatable),
            applied_by: self.applied_by.clone(),
        };
        self.history.record_repeatable(&running).await?;
        let connection = repeatable.connection.clone();
        self.migrator.events.emit(EventKind::MigrationStarted {
            version: repeatable.version,
            name: format!("R__{name}"),
            direction: Direction::Up,
            connection: connection.clone(),
        });
        let capabilities = self.history.capabilities();
        let transactional = repeatable.transactional_in(Direction::Up)
            && repeatable.own_transaction_in(Direction::Up).is_none();
        let giving = giving_of(
            self.migrator.config.table_lock_timeout,
            repeatable,
            Direction::Up,
            Bracket::Marked,
            transactional,
            &capabilities,
        );
        let lock_timeout = match giving {
            Giving::After { timeout, .. } => Some(timeout),
            Giving::Waits { .. } => None,
        };
        let text = repeatable.step(Direction::Up).unwrap_or_default();
        let step = Step {
            body: StepBody::Text(text, repeatable.parsed_in(Direction::Up)),
            transactional,
            record: None,
            checks_lock: false,
            lock_timeout,
            resume_at: 0,
        };
        let started = Instant::now();
        match self.history.run(step).await {
            Ok(()) => {
                let duration_ms = started.elapsed().as_millis();
                let applied = RepeatableChange::Applied {
                    name: name.clone(),
                    duration_ms: duration_ms.try_into().unwrap_or(i64::MAX),
                };
                self.history.record_repeatable(&applied).await?;
                let mut done = StepReport::new(0, name, Direction::Up, connection);
                done.duration_ms = duration_ms.try_into().unwrap_or(u64::MAX);
                done.repeatable = true;
                Ok(done)
            }
            Err(failure) => Err(self
                .repeatable_failed(repeatable, failure, transactional)
                .await),
        }
    }

    /// The error of a repeatable that failed, after keeping why in its record (which stays
    /// `running`, so the next run applies it again).
    async fn repeatable_failed(
        &mut self,
        repeatable: &Migration,
        mut failure: StepFailure,
        transactional: bool,
    ) -> Error {
        let source = repeatable.source_of(Direction::Up);
        if let (Some(line), None) = (failure.error.line, &failure.error.file) {
            failure.error.line = Some(source.file_line(line));
            failure.error.file = Some(source.file.clone());
        }
        let why = RepeatableChange::Failed {
            name: repeatable.name.clone(),
            failure: failure.error.recorded(),
        };
        let kept = self.history.record_repeatable(&why).await;
        let error = Error::new(ErrorKind::MigrationFailed {
            version: repeatable.version,
            name: repeatable.name.clone(),
            direction: Direction::Up,
            connection: repeatable.connection.clone(),
            error: *failure.error,
            left_dirty: false,
            transactional,
            repeatable: true,
        });
        match kept {
            Ok(()) => error,
            Err(not_kept) => error.with_secondary(not_kept),
        }
    }
}
