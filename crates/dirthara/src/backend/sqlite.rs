//! SQLite: history and steps on one connection; no lock of its own (the engine refuses
//! `locking = true` before connecting, see `lock::resolve_strategy`).

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection, Either, Executor};

use super::sql::{text_rows, Sibling, SqlBackend, SqlDialect, SqlDriver};
use super::{connect_failure, Backend, BackendKind, Capabilities, ConnectFailure, ConnectRequest};
use crate::lock::LockSupport;
use crate::source::sql::{split_statements, Statement};

pub(crate) struct SqliteDriver {
    conn: SqliteConnection,
    options: SqliteConnectOptions,
    init_sql: Option<String>,
    /// Where the statement that failed in the last `execute_count` starts.
    failed_line: Option<usize>,
}

pub(crate) async fn connect(request: &ConnectRequest) -> Result<Box<dyn Backend>, ConnectFailure> {
    let mut options = SqliteConnectOptions::from_str(&request.url)
        .map_err(|e| ConnectFailure::driver(format!("invalid SQLite URL: {e}"), e, false))?;
    // A read-only command (status, preview, unlock) must not create the file it reads: a
    // database that does not exist yet is read as an empty one.
    if request.read_only && !options.get_filename().exists() && !is_in_memory(&request.url) {
        options = SqliteConnectOptions::from_str("sqlite::memory:").expect("a valid URL");
    }
    let options = options
        .create_if_missing(!request.read_only)
        // Another process writing at the same moment makes us wait a little, not fail at once.
        .busy_timeout(Duration::from_secs(5))
        .disable_statement_logging();
    let mut conn = options.connect().await.map_err(connect_failure)?;
    if let Some(init_sql) = &request.init_sql {
        super::run_init_sql(conn.execute(init_sql.as_str()).await.map(|_| ()), init_sql)?;
    }
    let driver = SqliteDriver {
        conn,
        options,
        init_sql: request.init_sql.clone(),
        failed_line: None,
    };
    Ok(Box::new(SqlBackend::new(driver, request)))
}

/// Statements sent to sqlx in one message, at most: each one SQLite prepares copies the rest
/// of its message (sqlx gives it the length, not a terminating NUL), so a message of K
/// statements copies about K/2 times its size. The whole file as one message, as sqlx would
/// send it, made a big file quadratic (2 MB of INSERTs: 2.7 s; 8 MB: 31 s) and kept every
/// prepared statement of it cached until the end (138 MB for the 2 MB). One statement per
/// message instead costs a round trip to sqlx's worker thread each (4.5x Python's
/// `executescript` on 32 MB); a few dozen make both costs small.
const BATCH_STATEMENTS: usize = 32;

/// The text tokenized at once: the statements are found a window at a time, so what is held
/// beside the text is one window's statements, not one entry per statement of the file. A
/// statement longer than the window widens it (doubling) until it fits.
const WINDOW_BYTES: usize = 16 * 1024;

/// The complete statements of the text from `pos` (their offsets and lines relative to
/// `pos`), and where the next window starts: after the last of them, or at the end.
fn window(sql: &str, pos: usize) -> (Vec<Statement<'_>>, usize) {
    let mut size = WINDOW_BYTES;
    loop {
        let mut end = (pos + size).min(sql.len());
        while !sql.is_char_boundary(end) {
            end -= 1;
        }
        let mut statements = split_statements(&sql[pos..end], SqlDialect::Sqlite);
        if end == sql.len() {
            return (statements, end);
        }
        // The window's end may cut the last statement short.
        statements.pop();
        if let Some(last) = statements.last() {
            let next = pos + end_of(last);
            return (statements, next);
        }
        size *= 2;
    }
}

/// The lines a statement's leading comments take (a statement's line is its first
/// non-blank character's; an error is about the code after them).
fn leading_comment_lines(text: &str) -> usize {
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        let skipped = if rest.starts_with("--") {
            rest.find('\n').map_or("", |end| &rest[end..])
        } else if let Some(comment) = rest.strip_prefix("/*") {
            comment.find("*/").map_or("", |end| &comment[end + 2..])
        } else {
            break;
        };
        rest = skipped;
    }
    let code = text.len() - rest.len();
    text[..code].bytes().filter(|&b| b == b'\n').count()
}

fn end_of(statement: &Statement<'_>) -> usize {
    statement.offset + statement.text.len()
}

/// Runs the statements of `text` in order, returning the rows they changed; on failure, how
/// many statements completed before the one that failed, and its error.
async fn run_batch(conn: &mut SqliteConnection, text: &str) -> Result<u64, (usize, sqlx::Error)> {
    let mut results = conn.fetch_many(sqlx::raw_sql(text));
    let (mut done, mut affected) = (0, 0);
    // sqlx yields each statement's result as it completes (after its rows, if any).
    while let Some(item) = std::future::poll_fn(|cx| results.as_mut().poll_next(cx)).await {
        match item {
            Ok(Either::Left(result)) => {
                done += 1;
                affected += result.rows_affected();
            }
            Ok(Either::Right(_row)) => {}
            Err(error) => return Err((done, error)),
        }
    }
    Ok(affected)
}

/// SQLite's error for text that ends inside a statement.
fn is_incomplete(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.message() == "incomplete input")
}

fn is_in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

#[async_trait]
impl SqlDriver for SqliteDriver {
    type Error = sqlx::Error;

    fn dialect(&self) -> SqlDialect {
        SqlDialect::Sqlite
    }

    /// Sends the text a batch of statements at a time (see [`BATCH_STATEMENTS`]), in order,
    /// on this connection: what sqlx would do with the whole text, in time linear in it.
    async fn execute_count(&mut self, sql: &str) -> Result<u64, sqlx::Error> {
        self.failed_line = None;
        // sqlx would loop for ever on the text after a NUL (SQLite's parser stops at it and
        // prepares nothing). Migrations never hold one (they are refused while loading).
        if let Err(reason) = crate::source::refuse_nul(sql) {
            return Err(sqlx::Error::InvalidArgument(format!(
                "the SQL text {reason}"
            )));
        }
        let mut affected = 0;
        // Where the next window of text starts, and its line.
        let (mut pos, mut line) = (0, 1);
        while pos < sql.len() {
            let (statements, next) = window(sql, pos);
            let batches = statements.len().div_ceil(BATCH_STATEMENTS);
            for (index, batch) in statements.chunks(BATCH_STATEMENTS).enumerate() {
                let text = &sql[pos + batch[0].offset..pos + end_of(&batch[batch.len() - 1])];
                let (done, error) = match run_batch(&mut self.conn, text).await {
                    Ok(rows) => {
                        affected += rows;
                        continue;
                    }
                    Err(failed) => failed,
                };
                let failed = &batch[done.min(batch.len() - 1)];
                let later = index + 1 < batches || next < sql.len();
                if is_incomplete(&error) && later {
                    // The tokenizer ended a statement where SQLite reads on. Nothing of it
                    // ran (it did not prepare): send the rest whole, as sqlx would.
                    let rest = &sql[pos + failed.offset..];
                    let rows = run_batch(&mut self.conn, rest).await;
                    return rows.map(|rows| affected + rows).map_err(|(_, error)| error);
                }
                self.failed_line =
                    Some(line + failed.line - 1 + leading_comment_lines(failed.text));
                return Err(error);
            }
            line += sql.as_bytes()[pos..next]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            pos = next;
        }
        Ok(affected)
    }

    fn ended_inside_a_statement(&self, error: &sqlx::Error) -> bool {
        is_incomplete(error)
    }

    fn failed_statement_line(&self) -> Option<usize> {
        self.failed_line
    }

    fn open_sibling(&self) -> Sibling<sqlx::Error> {
        // The sibling holds the lease: when another process is writing, an acquire attempt
        // should report "held" at once (SQLITE_BUSY), not wait out the 5 s busy timeout.
        let options = self.options.clone();
        let init_sql = self.init_sql.clone();
        Box::pin(async move {
            let busy = options.clone().busy_timeout(Duration::from_millis(200));
            let mut conn = busy.connect().await?;
            if let Some(init_sql) = &init_sql {
                conn.execute(init_sql.as_str()).await?;
            }
            Ok(Box::new(SqliteDriver {
                conn,
                options,
                init_sql,
                failed_line: None,
            }) as Box<dyn SqlDriver<Error = sqlx::Error>>)
        })
    }

    fn schema(&self) -> Option<&str> {
        None
    }

    fn capabilities(&self) -> Capabilities {
        BackendKind::Sqlite.capabilities()
    }

    fn lock_support(&self) -> LockSupport {
        BackendKind::Sqlite.lock_support()
    }

    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, sqlx::Error> {
        text_rows(&self.conn.fetch_all(sql).await?)
    }

    fn connection(&mut self) -> crate::rust_migration::Connection<'_> {
        crate::rust_migration::Connection::Sqlite(&mut self.conn)
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}
