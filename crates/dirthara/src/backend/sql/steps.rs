//! Running a step's text or code on a SQL connection: plain, in a transaction of its own
//! (with its history record, where it has one), or statement by statement as the database's
//! command-line client splits a script (MySQL's `DELIMITER`). Every transaction here begins
//! in `begin_step` and ends in `end_step`, unless the driver sends the whole transaction as
//! one message.

use super::{change_sql, RecordFn, SqlBackend, SqlDriver};
use crate::backend::{database_error, StepFailure};
use crate::code::RustMigration;
use crate::error::DatabaseError;
use crate::history::HistoryChange;
use crate::migration::Direction;

fn failed(error: sqlx::Error) -> StepFailure {
    StepFailure::new(database_error(error, None))
}

impl<D: SqlDriver> SqlBackend<D> {
    /// Runs step text that commits without a history record.
    pub(super) async fn run_text(
        &mut self,
        text: &str,
        transactional: bool,
    ) -> Result<(), StepFailure> {
        if let Some(statements) = self.driver.client_statements(text) {
            return self.run_client_script(&statements, transactional).await;
        }
        if transactional {
            return self.run_in_transaction(text, None, false).await;
        }
        self.driver.before_step().await.map_err(failed)?;
        match self.driver.execute(text).await {
            Ok(()) => Ok(()),
            Err(error) => {
                let failure = self.step_failed(error, text);
                self.driver.clean_up_after_failure().await;
                Err(self.locate_error(failure, text, 1))
            }
        }
    }

    /// The failure of step `text`, located where the database or the driver knows where.
    fn step_failed(&self, error: sqlx::Error, text: &str) -> StepFailure {
        let mut failure = StepFailure::new(database_error(error, Some((text, 0))));
        failure.error.line = (failure.error.line).or(self.driver.failed_statement_line());
        failure
    }

    /// Runs step text and its history change (if any) so that both commit or neither does.
    pub(super) async fn run_in_transaction(
        &mut self,
        text: &str,
        record: Option<&HistoryChange>,
        checks_lock: bool,
    ) -> Result<(), StepFailure> {
        let (dialect, names) = (self.driver.dialect(), &self.names);
        let build = |elapsed| {
            change_sql(
                dialect,
                names,
                record.expect("built with a record"),
                elapsed,
            )
        };
        let build: Option<&RecordFn<'_>> = record.map(|_| &build as &RecordFn<'_>);
        if let Some(sent) = self
            .driver
            .execute_atomically(text, build, checks_lock)
            .await
        {
            return sent.map_err(|failure| self.locate_error(failure, text, 1));
        }
        self.begin_step(true).await?;
        let started = std::time::Instant::now();
        let mut result = (self.driver.execute(text).await).map_err(|e| self.step_failed(e, text));
        if let (Ok(()), Some(change)) = (&result, record) {
            let sql = self.change_sql(change, Some(started.elapsed()));
            result = self.driver.execute(&sql).await.map_err(failed);
        }
        let ended = self.end_step(true, result).await;
        ended.map_err(|failure| self.locate_error(failure, text, 1))
    }

    /// Runs a Rust migration's code on this connection, with `record` in its transaction.
    pub(super) async fn run_code(
        &mut self,
        code: &dyn RustMigration,
        direction: Direction,
        transactional: bool,
        record: Option<&HistoryChange>,
    ) -> Result<(), StepFailure> {
        self.begin_step(transactional).await?;
        let started = std::time::Instant::now();
        let ran = match direction {
            Direction::Up => code.up(self.driver.connection()).await,
            Direction::Down => code.down(self.driver.connection()).await,
        };
        let mut result = ran.map_err(|e| StepFailure::new(DatabaseError::from_rust_migration(e)));
        if let (Ok(()), Some(change)) = (&result, record) {
            let sql = self.change_sql(change, Some(started.elapsed()));
            result = self.driver.execute(&sql).await.map_err(failed);
        }
        self.end_step(transactional, result).await
    }

    /// Runs a client script statement by statement, as the mysql client would.
    async fn run_client_script(
        &mut self,
        statements: &[crate::source::sql::Statement<'_>],
        transactional: bool,
    ) -> Result<(), StepFailure> {
        self.begin_step(transactional).await?;
        let mut result = Ok(());
        for statement in statements {
            if let Err(error) = self.driver.execute(statement.text).await {
                result = Err(self.locate_error(failed(error), statement.text, statement.line));
                break;
            }
        }
        self.end_step(transactional, result).await
    }

    /// Prepares the session for a step sent statement by statement, and opens its transaction.
    async fn begin_step(&mut self, transactional: bool) -> Result<(), StepFailure> {
        self.driver.before_step().await.map_err(failed)?;
        if transactional {
            let begin = self.driver.dialect().begin();
            self.driver.execute(begin).await.map_err(failed)?;
        }
        Ok(())
    }

    /// Commits a step that went well; after one that failed, leaves the session clean.
    async fn end_step(
        &mut self,
        transactional: bool,
        mut result: Result<(), StepFailure>,
    ) -> Result<(), StepFailure> {
        if transactional && result.is_ok() {
            result = self.driver.execute("COMMIT").await.map_err(failed);
        }
        if result.is_err() {
            self.driver.clean_up_after_failure().await;
        }
        result
    }

    /// Points the failure at the file's line where the driver can tell from the message
    /// alone which line of `text` (starting at `first_line` of the file) failed.
    fn locate_error(&self, mut failure: StepFailure, text: &str, first_line: usize) -> StepFailure {
        self.driver.locate(&mut failure.error, text, first_line);
        failure
    }
}
