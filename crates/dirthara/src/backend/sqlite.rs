//! SQLite: history and steps on one connection; no lock of its own (the engine refuses
//! `locking = true` before connecting, see `lock::resolve_strategy`).

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection, Executor};

use super::sql::{text_rows, Dialect, SqlBackend, SqlDriver};
use super::{connect_failure, Backend, BackendKind, Capabilities, ConnectFailure, ConnectRequest};
use crate::lock::LockSupport;

pub(crate) struct SqliteDriver {
    conn: SqliteConnection,
    options: SqliteConnectOptions,
    init_sql: Option<String>,
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
    };
    Ok(Box::new(SqlBackend::new(driver, request)))
}

fn is_in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

#[async_trait]
impl SqlDriver for SqliteDriver {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn execute_count(&mut self, sql: &str) -> Result<u64, sqlx::Error> {
        self.conn.execute(sql).await.map(|r| r.rows_affected())
    }

    async fn open_sibling(&self) -> Result<Box<dyn SqlDriver>, sqlx::Error> {
        // The sibling holds the lease: when another process is writing, an acquire attempt
        // should report "held" at once (SQLITE_BUSY), not wait out the 5 s busy timeout.
        let mut conn = self
            .options
            .clone()
            .busy_timeout(Duration::from_millis(200))
            .connect()
            .await?;
        if let Some(init_sql) = &self.init_sql {
            conn.execute(init_sql.as_str()).await?;
        }
        Ok(Box::new(SqliteDriver {
            conn,
            options: self.options.clone(),
            init_sql: self.init_sql.clone(),
        }))
    }

    fn schema(&self) -> Option<&str> {
        None
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            database: "sqlite",
            transactional_ddl: true,
            folds_records: false,
        }
    }

    fn lock_support(&self) -> LockSupport {
        BackendKind::Sqlite.lock_support()
    }

    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, sqlx::Error> {
        text_rows(&self.conn.fetch_all(sql).await?)
    }

    fn connection(&mut self) -> crate::code::Connection<'_> {
        crate::code::Connection::Sqlite(&mut self.conn)
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}
