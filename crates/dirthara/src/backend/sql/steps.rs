//! Running a step's text or code on a SQL connection.
//!
//! A step that can be rolled back whole runs in one transaction — with its history record
//! where it has one — as one message where the driver can (PostgreSQL) and statement by
//! statement otherwise. Every other step runs statement by statement, as psql, the mysql
//! client, goose and dbmate run them: a `CREATE INDEX CONCURRENTLY` cannot share a message
//! with another statement, and only then can a failure be pinned to its statement and told
//! apart from one that committed nothing. Every transaction here begins in `begin_step` and
//! ends in `end_step`, unless the driver sends the whole transaction as one message.

use std::time::Duration;

use super::script::{self, locate_in_step, Progress};
use super::{change_sql, Atomic, RecordFn, SqlBackend, SqlDriver};
use super::{database_error, DriverError};
use crate::backend::sql::SqlSyntax;
use crate::backend::StepFailure;
use crate::error::DatabaseError;
use crate::history::HistoryChange;
use crate::migration::{Direction, ParsedStep};
use crate::rust_migration::RustMigration;
use crate::source::sql::{split_statements, ClientScript, Statement};

fn failed(error: impl DriverError) -> StepFailure {
    StepFailure::new(database_error(error, None))
}

/// How a step sent statement by statement is sent.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sending {
    /// How long each statement may wait for a table lock ([`crate::backend::Step::lock_timeout`]).
    pub lock_timeout: Option<Duration>,
    /// The statement to start at ([`crate::backend::Step::resume_at`]).
    pub resume_at: usize,
}

impl<D: SqlDriver> SqlBackend<D> {
    /// Runs step text that commits without a history record: in a transaction of its own
    /// when `transactional` and the database can roll all of it back; else statement by
    /// statement. A script written for the database's command-line client (MySQL's
    /// `DELIMITER $$ ... $$`) was split when it was loaded (`parsed`): its statements are sent
    /// as they are, never the text whole.
    pub(super) async fn run_text(
        &mut self,
        text: &str,
        parsed: &ParsedStep,
        transactional: bool,
        sending: Sending,
    ) -> Result<(), StepFailure> {
        let dialect = self.driver.dialect();
        let client_script = parsed.get::<ClientScript>();
        let statements = match client_script {
            Some(script) => script.statements(),
            None => split_statements(text, dialect),
        };
        let rolls_back = self.driver.capabilities().transactional_ddl
            || !(statements.iter()).any(|s| script::commits_implicitly(dialect, s.text));
        match (transactional && rolls_back, client_script.is_some()) {
            (true, false) if self.driver.capabilities().transactional_ddl => {
                let atomic = Atomic {
                    lock_timeout: sending.lock_timeout,
                    ..Atomic::default()
                };
                self.run_in_transaction(text, None, atomic).await
            }
            // One statement that does not commit implicitly is a transaction of its own
            // already: no `BEGIN`/`COMMIT` round trips around it.
            (true, _) if statements.len() <= 1 => {
                self.run_one_by_one(text, &statements, false, sending).await
            }
            (wrapped, _) => {
                self.run_one_by_one(text, &statements, wrapped, sending)
                    .await
            }
        }
    }

    /// Runs `statements` of step `text` one message each, in a transaction of ours when
    /// `wrapped`. A failure names its statement's line, and says whether anything committed
    /// before it: nothing did when it was the first to change anything and undid itself, or
    /// when the transaction it was in is rolled back.
    async fn run_one_by_one(
        &mut self,
        text: &str,
        statements: &[Statement<'_>],
        wrapped: bool,
        sending: Sending,
    ) -> Result<(), StepFailure> {
        self.begin_step(wrapped).await?;
        // The statements an earlier attempt ran (and committed) are not sent again.
        let skipped = sending.resume_at.min(statements.len());
        // A migration that sets the timeout itself wins from that statement on — also when
        // an attempt resumes after it: the session still has the migration's value.
        let setting = self.driver.lock_timeout_setting();
        let sets_own = |statement: &Statement<'_>| {
            setting.is_some_and(|name| script::sets_setting(statement.text, name))
        };
        let mut own_timeout = statements[..skipped].iter().any(sets_own);
        let in_each_message =
            sending.lock_timeout.is_some() && self.driver.lock_timeout_in_each_message();
        if !in_each_message && !own_timeout {
            // For the session: what the step's statements wait for, until the next step sets
            // its own.
            if let Some(sql) = self.driver.lock_timeout_sql(sending.lock_timeout, false) {
                let refused = |error| StepFailure {
                    nothing_changed: true,
                    ..failed(error)
                };
                self.driver.execute(&sql).await.map_err(refused)?;
            }
        }
        let mut progress = Progress::new(self.driver.dialect(), wrapped);
        for (index, statement) in statements.iter().enumerate().skip(skipped) {
            let mut head = String::new();
            if in_each_message && !own_timeout {
                if let Some(sql) = self.driver.lock_timeout_sql(sending.lock_timeout, true) {
                    head = format!("{sql};\n");
                }
            }
            own_timeout |= sets_own(statement);
            let mut sent = match head.is_empty() {
                true => self.driver.execute(statement.text).await,
                false => {
                    self.driver
                        .execute(&format!("{head}{}", statement.text))
                        .await
                }
            };
            if matches!(&sent, Err(e) if !head.is_empty() && self.driver.refused_in_a_transaction_block(e))
            {
                // `VACUUM`, `CREATE DATABASE`...: a statement that may not share a message
                // (an implicit transaction) with its `SET LOCAL` runs without the timeout, as
                // a `CONCURRENTLY` build does. The refused message ran nothing.
                head.clear();
                sent = self.driver.execute(statement.text).await;
            }
            if let Err(error) = &sent {
                if self.driver.ended_inside_a_statement(error) && index + 1 < statements.len() {
                    // The tokenizer ended this statement where the database reads on: send
                    // the rest whole, as the database reads it.
                    let rest = &text[statement.offset..];
                    let sent = self.driver.execute(rest).await;
                    let result = sent.map_err(|error| {
                        let mut failure = self.step_failed(error, rest);
                        failure.error.line =
                            (failure.error.line).map(|line| statement.line + line - 1);
                        // Which of the rest's statements ran before it failed is not known.
                        failure
                    });
                    return self.end_step(wrapped, result).await;
                }
            }
            if let Err(error) = sent {
                // PostgreSQL's position is into the statement sent; MySQL says the line of a
                // syntax error in its message; else the error is where the statement starts.
                let error = database_error(error, Some((statement.text, head.chars().count())));
                let mut failure = StepFailure::new(error);
                if failure.error.line.is_none() {
                    self.driver
                        .locate(&mut failure.error, statement.text, statement.line);
                    if failure.error.line.is_none() {
                        locate_in_step(&mut failure.error, text, statement);
                    }
                } else if failure.error.column.is_some() {
                    locate_in_step(&mut failure.error, text, statement);
                }
                failure.nothing_changed = !failure.error.connection_lost
                    && skipped == 0
                    && progress.nothing_changed_if_fails(statement.text);
                failure.statement = Some(index);
                self.driver.clean_up_after_failure().await;
                return Err(failure);
            }
            progress.ran(statement.text);
        }
        self.end_step(wrapped, Ok(())).await
    }

    /// Runs step text and its history change (if any) so that both commit or neither does.
    pub(super) async fn run_in_transaction(
        &mut self,
        text: &str,
        record: Option<&HistoryChange>,
        atomic: Atomic,
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
        if let Some(sent) = self.driver.execute_atomically(text, build, atomic).await {
            return sent.map_err(|failure| self.rolled_back(failure, text));
        }
        if atomic.checks_lock {
            // Only a step sent as one message can check the lock inside its transaction; the
            // engine asks that only of a session lock that says it can (`verifies_in_step`).
            return Err(StepFailure::refused(
                "this database cannot check the session lock inside a step",
            ));
        }
        self.begin_step(true).await?;
        if let Some(sql) = self.driver.lock_timeout_sql(atomic.lock_timeout, true) {
            self.driver.execute(&sql).await.map_err(failed)?;
        }
        let started = std::time::Instant::now();
        let mut result = (self.driver.execute(text).await).map_err(|e| self.step_failed(e, text));
        if let (Ok(()), Some(change)) = (&result, record) {
            let sql = self.change_sql(change, Some(started.elapsed()));
            result = self.driver.execute(&sql).await.map_err(failed);
        }
        let ended = self.end_step(true, result).await;
        ended.map_err(|failure| self.rolled_back(failure, text))
    }

    /// The failure of step `text` sent whole, located where the database or the driver
    /// knows where.
    fn step_failed(&self, error: D::Error, text: &str) -> StepFailure {
        let mut failure = StepFailure::new(database_error(error, Some((text, 0))));
        failure.error.line = (failure.error.line).or(self.driver.failed_statement_line());
        failure
    }

    /// A step that ran in one transaction failed: nothing of it stayed, unless the
    /// connection died (a `COMMIT` may then have happened unseen). A MySQL syntax error
    /// says its line itself.
    fn rolled_back(&self, mut failure: StepFailure, text: &str) -> StepFailure {
        if failure.error.line.is_none() {
            self.driver.locate(&mut failure.error, text, 1);
        }
        failure.nothing_changed |= !failure.error.connection_lost;
        failure
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
        // Code may run DDL, which commits implicitly where DDL is not transactional.
        let undone = transactional && self.driver.capabilities().transactional_ddl;
        self.end_step(transactional, result)
            .await
            .map_err(|mut failure| {
                failure.nothing_changed |= undone && !failure.error.connection_lost;
                failure
            })
    }

    /// Prepares the session for a step sent statement by statement, and opens its transaction.
    async fn begin_step(&mut self, transactional: bool) -> Result<(), StepFailure> {
        // Nothing of the step ran yet: a failure here changed nothing.
        let refused = |error| StepFailure {
            nothing_changed: true,
            ..failed(error)
        };
        self.driver.before_step().await.map_err(refused)?;
        if transactional {
            let begin = self.driver.dialect().begin();
            self.driver.execute(begin).await.map_err(refused)?;
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
            result = self.driver.execute("COMMIT").await.map_err(|error| {
                // A COMMIT refused (a deferred constraint) rolls back; a lost one may not.
                let mut failure = failed(error);
                failure.nothing_changed = !failure.error.connection_lost;
                failure
            });
        }
        if result.is_err() {
            self.driver.clean_up_after_failure().await;
        }
        result
    }
}
