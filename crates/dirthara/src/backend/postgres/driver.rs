//! The PostgreSQL driver as the shared SQL layer uses it: statements and rows, the lock
//! guard that travels inside a step's own transaction, the table-lock timeout and its
//! blocker, and the session's reset between commands.

use super::super::sql::{
    database_error, text_rows, Atomic, RecordFn, Sibling, SqlDialect, SqlDriver,
};
use super::super::{Capabilities, ConnectRequest, StepFailure};
use crate::error::Result;
use crate::events::Blocker;
use crate::lock::{LockSupport, SessionLock};
use crate::source::sql::split_statements;
use async_trait::async_trait;
use sqlx::{ConnectOptions, Connection, Executor};
use std::time::Duration;

use super::{
    blocker, identity, lock_guard, lock_key, search_path, PgDriver, PgSiblingParts, CHECK_INTERVAL,
    IDENTITY,
};

#[async_trait]
impl SqlDriver for PgDriver {
    type Error = sqlx::Error;

    fn server_version(&self) -> Option<&str> {
        Some(&self.version)
    }

    fn dialect(&self) -> SqlDialect {
        SqlDialect::Postgres
    }

    async fn execute_count(&mut self, sql: &str) -> Result<u64, sqlx::Error> {
        self.conn.execute(sql).await.map(|r| r.rows_affected())
    }

    fn open_sibling(&self) -> Sibling<sqlx::Error> {
        let options = self.options.clone();
        let mut sibling = PgSiblingParts {
            url: self.url.clone(),
            connection: self.connection.clone(),
            schema: self.schema.clone(),
            lock_key: self.lock_key,
            database_oid: self.database_oid,
            direct: self.direct,
            lock_support: self.lock_support,
            setup: self.setup.clone(),
            version: self.version.clone(),
        };
        Box::pin(async move {
            // The setup already ran once on this connection, so it succeeds again unless the
            // server changed in between; then its error is the sibling's.
            let mut conn = options.connect().await?;
            if !sibling.setup.is_empty() {
                conn.execute(sibling.setup.as_str()).await?;
            }
            Ok(Box::new(PgDriver {
                conn,
                options,
                url: std::mem::take(&mut sibling.url),
                connection: std::mem::take(&mut sibling.connection),
                schema: std::mem::take(&mut sibling.schema),
                lock_key: sibling.lock_key,
                database_oid: sibling.database_oid,
                direct: sibling.direct,
                lock_support: sibling.lock_support,
                listener: None,
                listener_failed: false,
                setup: sibling.setup,
                session_used: false,
                session_check: None,
                version: std::mem::take(&mut sibling.version),
            }) as Box<dyn SqlDriver<Error = sqlx::Error>>)
        })
    }

    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, sqlx::Error> {
        text_rows(&self.conn.fetch_all(sql).await?)
    }

    /// `DISCARD ALL`, as a pooler resets a server session between clients: settings, temporary
    /// tables, prepared plans, `LISTEN`s and advisory locks all go. Then the new target's
    /// setup, and what the session learns about itself again (its schema decides the lock's
    /// key and where the history is). Only a direct connection whose lock needed no pooler
    /// check, and that is not listening, is reused: through a proxy a session is not ours to
    /// keep.
    async fn reopen(&mut self, request: &ConnectRequest) -> Result<bool, sqlx::Error> {
        if !self.direct || self.session_check.is_some() || self.listener.is_some() {
            return Ok(false);
        }
        // A Rust migration's prepared statements, cached by the driver, are gone with the
        // DISCARD: the driver forgets them first.
        self.conn.clear_cached_statements().await?;
        let mut setup = CHECK_INTERVAL.to_string();
        for sql in [search_path(request), request.init_sql.clone()]
            .into_iter()
            .flatten()
        {
            setup.push_str(";\n");
            setup.push_str(&sql);
        }
        // A message of its own: DISCARD ALL refuses to run in a transaction block, which a
        // message of several statements is.
        self.conn.execute("DISCARD ALL").await?;
        let rows = self
            .conn
            .fetch_all(format!("{setup}; {IDENTITY}").as_str())
            .await?;
        let found = rows
            .last()
            .ok_or_else(|| sqlx::Error::Protocol("no identity after DISCARD ALL".into()))
            .and_then(identity)?;
        self.lock_key = lock_key(&found.database, &found.schema, &request.history_table);
        self.database_oid = found.database_oid;
        self.schema = found.schema;
        self.connection = request.name.clone();
        self.setup = setup;
        self.session_used = false;
        Ok(true)
    }

    async fn execute_atomically(
        &mut self,
        step: &str,
        record: Option<&RecordFn<'_>>,
        atomic: Atomic,
    ) -> Option<Result<(), StepFailure>> {
        // One round trip: PostgreSQL runs a multi-statement simple query as one implicit
        // transaction, so the session reset, the lock check, the step and its record commit
        // together or not at all. The record measures the step's duration itself (`None`).
        // A newline before `;` ends a trailing `--` comment in the step.
        let mut head = self.take_reset();
        // Planted fault (tests only, with `lock_confirmed_blindly`): the step without its check.
        if record.is_some()
            && atomic.checks_lock
            && !dirthara_core::planted!("lock_confirmed_blindly")
        {
            head.push_str(&lock_guard(self.lock_key));
            head.push('\n');
        }
        // `SET LOCAL`: for this transaction only, so nothing of it outlives the step — not
        // even through a transaction-pooling proxy — and the step's own `SET lock_timeout`,
        // which comes after it, wins.
        if let Some(timeout) = self.lock_timeout_sql(atomic.lock_timeout, true) {
            head.push_str(&timeout);
            head.push_str(";\n");
        }
        let sql = match record {
            Some(record) => format!("{head}{step}\n;\n{}", record(None)),
            None => format!("{head}{step}"),
        };
        let sent = self.execute_counted(&sql).await;
        Some(sent.map_err(|(completed, error)| {
            let mut failure =
                StepFailure::new(database_error(error, Some((step, head.chars().count()))));
            // PostgreSQL answers each statement of the message in turn: the answers before
            // the error say which statement of the step failed, where it gave no position.
            if failure.error.line.is_none() {
                let head = split_statements(&head, SqlDialect::Postgres).len();
                let statements = split_statements(step, SqlDialect::Postgres);
                if let Some(failed) = completed.checked_sub(head).and_then(|i| statements.get(i)) {
                    failure.error.line = Some(failed.code_line);
                }
            }
            failure
        }))
    }

    async fn before_step(&mut self) -> Result<(), sqlx::Error> {
        let reset = self.take_reset();
        if reset.is_empty() {
            return Ok(());
        }
        self.execute(&reset).await
    }

    fn schema(&self) -> Option<&str> {
        Some(self.schema.as_str()).filter(|s| !s.is_empty())
    }

    fn lock_timeout_sql(&mut self, timeout: Option<Duration>, local: bool) -> Option<String> {
        // A session-level one is undone by the reset before the next step. Zero (an attempt
        // that may not wait) is PostgreSQL's shortest, 1 ms: `0` would turn the timeout off.
        let ms = timeout?.as_millis().max(1);
        let scope = if local { "LOCAL " } else { "" };
        Some(format!("SET {scope}lock_timeout = '{ms}ms'"))
    }

    fn session_identity(&self) -> String {
        self.options
            .get_application_name()
            .unwrap_or_default()
            .to_string()
    }

    async fn who_blocks(&mut self, identity: &str) -> Option<(Option<String>, Blocker)> {
        blocker::who_blocks(&mut self.conn, identity).await
    }

    async fn blocker_gone(&mut self, blocker: &Blocker) -> Option<bool> {
        blocker::gone(&mut self.conn, blocker).await
    }

    fn lock_timeout_setting(&self) -> Option<&'static str> {
        Some("lock_timeout")
    }

    fn lock_timeout_in_each_message(&self) -> bool {
        true
    }

    /// 25001 `active_sql_transaction`: `VACUUM cannot run inside a transaction block`.
    fn refused_in_a_transaction_block(&self, error: &sqlx::Error) -> bool {
        error
            .as_database_error()
            .is_some_and(|e| e.code().as_deref() == Some("25001"))
    }

    fn capabilities(&self) -> Capabilities {
        crate::backend::BackendKind::Postgres.capabilities()
    }

    fn lock_support(&self) -> LockSupport {
        self.lock_support
    }

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        self.lock_support
            .has_session_lock()
            .then_some(self as &mut dyn SessionLock)
    }

    fn connection(&mut self) -> crate::rust_migration::Connection<'_> {
        crate::rust_migration::Connection::Postgres(&mut self.conn)
    }

    async fn close(self: Box<Self>) {
        let mut this = *self;
        if let Some(listener) = this.listener {
            listener.close().await;
        }
        if let Some(check) = this.session_check.as_mut() {
            check.close_sibling().await;
        }
        let _ = this.conn.close().await;
    }
}
