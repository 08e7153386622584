//! Running a step's text or code on a SQL connection: plain, in a transaction of its own
//! (with its history record, where it has one), or statement by statement as the mysql client
//! splits a `DELIMITER` script. Every transaction here begins in `begin_step` and ends in
//! `end_step`, unless the driver sends the whole transaction as one message.

use super::{change_sql, Dialect, RecordFn, SqlBackend, SqlDriver};
use crate::backend::{database_error, StepFailure};
use crate::code::RustMigration;
use crate::error::DatabaseError;
use crate::history::HistoryChange;
use crate::migration::Direction;
use crate::source::sql;

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
        if let Some(statements) = self.client_script(text) {
            return self.run_client_script(&statements, transactional).await;
        }
        if transactional {
            return self.run_in_transaction(text, None).await;
        }
        self.driver.before_step().await.map_err(failed)?;
        match self.driver.execute(text).await {
            Ok(()) => Ok(()),
            Err(error) => {
                let failure = self.step_failed(error, text);
                self.driver.clean_up_after_failure().await;
                Err(self.locate_mysql_error(failure, text, 1))
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
        if let Some(sent) = self.driver.execute_atomically(text, build).await {
            return sent.map_err(|failure| self.locate_mysql_error(failure, text, 1));
        }
        self.begin_step(true).await?;
        let started = std::time::Instant::now();
        let mut result = (self.driver.execute(text).await).map_err(|e| self.step_failed(e, text));
        if let (Ok(()), Some(change)) = (&result, record) {
            let sql = self.change_sql(change, Some(started.elapsed()));
            result = self.driver.execute(&sql).await.map_err(failed);
        }
        let ended = self.end_step(true, result).await;
        ended.map_err(|failure| self.locate_mysql_error(failure, text, 1))
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
        let mut result =
            ran.map_err(|e| StepFailure::new(DatabaseError::from_message(e.to_string())));
        if let (Ok(()), Some(change)) = (&result, record) {
            let sql = self.change_sql(change, Some(started.elapsed()));
            result = self.driver.execute(&sql).await.map_err(failed);
        }
        self.end_step(transactional, result).await
    }

    /// A MySQL script written for the mysql client (`DELIMITER $$ ... $$`), split as that
    /// client splits it; `None` for text the server takes whole. (The loader already refused
    /// a script that does not split.)
    fn client_script<'t>(&self, text: &'t str) -> Option<Vec<sql::Statement<'t>>> {
        if self.driver.dialect() != Dialect::Mysql || !sql::has_client_delimiter(text) {
            return None;
        }
        sql::mysql_client_statements(text).ok()
    }

    /// Runs a client script statement by statement, as the mysql client would.
    async fn run_client_script(
        &mut self,
        statements: &[sql::Statement<'_>],
        transactional: bool,
    ) -> Result<(), StepFailure> {
        self.begin_step(transactional).await?;
        let mut result = Ok(());
        for statement in statements {
            if let Err(error) = self.driver.execute(statement.text).await {
                result =
                    Err(self.locate_mysql_error(failed(error), statement.text, statement.line));
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

    /// MySQL says where a syntax error is as `... at line N` of the statement that failed;
    /// that statement is known when the text is one statement (starting at `first_line` of
    /// the file) or was split by the client-script reader.
    pub(super) fn locate_mysql_error(
        &self,
        mut failure: StepFailure,
        text: &str,
        first_line: usize,
    ) -> StepFailure {
        if self.driver.dialect() != Dialect::Mysql || failure.error.line.is_some() {
            return failure;
        }
        let Some(line) = failure
            .error
            .message
            .rsplit_once(" at line ")
            .and_then(|(_, n)| n.trim().parse::<usize>().ok())
        else {
            return failure;
        };
        // Lines count from the start of the text sent, comments included.
        if sql::split_statements(text, sql::SqlDialect::MySql).len() == 1 {
            failure.error.line = Some(first_line + line - 1);
        }
        failure
    }
}
