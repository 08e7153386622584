//! MySQL / MariaDB: `GET_LOCK` on the history connection, retried with short jittered
//! sleeps (there is no release notification). DDL commits implicitly here, so every step
//! is bracketed by a `running` record and its completion.
//!
//! A limit worth knowing: the server notices a vanished client only when the running
//! statement ends, so a runner killed inside a long statement keeps the lock until then.

use std::str::FromStr;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Connection, Executor, Row};

use super::sql::{Dialect, SqlBackend, SqlDriver};
use super::{
    connect_failure, database_message, Backend, BackendKind, ConnectFailure, ConnectRequest,
    SessionLock,
};
use crate::error::{Error, ErrorKind, Result};
use crate::events::LockHolder;
use crate::lock::LOCK_NAME;
use crate::migration::hex;

/// MySQL limits user-lock names to 64 characters.
const MAX_LOCK_NAME: usize = 64;

pub(crate) struct MySqlDriver {
    conn: MySqlConnection,
    options: MySqlConnectOptions,
    connection: String,
    database: String,
    init_sql: Option<String>,
}

pub(crate) async fn connect(request: &ConnectRequest) -> Result<Box<dyn Backend>, ConnectFailure> {
    let url = match request.url.strip_prefix("mariadb:") {
        Some(rest) => format!("mysql:{rest}"),
        None => request.url.clone(),
    };
    let options = MySqlConnectOptions::from_str(&url)
        .map_err(|e| ConnectFailure {
            message: format!("invalid MySQL URL: {e}"),
            transient: false,
        })?
        .disable_statement_logging();
    let mut conn = options.connect().await.map_err(connect_failure)?;
    if let Some(init_sql) = &request.init_sql {
        super::run_init_sql(conn.execute(init_sql.as_str()).await.map(|_| ()), init_sql)?;
    }
    // Resolved once, after `init_sql`: dirthara's own statements name their tables in this
    // database, whatever `USE` a migration runs.
    let database: Option<String> = sqlx::query_scalar("SELECT CAST(DATABASE() AS CHAR)")
        .fetch_one(&mut conn)
        .await
        .map_err(connect_failure)?;
    let Some(database) = database else {
        return Err(ConnectFailure {
            message: "the URL names no database; add it as the path, e.g. mysql://user@host/app"
                .into(),
            transient: false,
        });
    };
    Ok(Box::new(SqlBackend {
        driver: MySqlDriver {
            conn,
            options,
            connection: request.name.clone(),
            database,
            init_sql: request.init_sql.clone(),
        },
        kind: BackendKind::Mysql,
        connection: request.name.clone(),
    }))
}

impl MySqlDriver {
    /// Named locks are server-wide, so the key carries the schema and history table:
    /// unrelated schemas on one server do not wait on each other.
    fn key(&self, table: &str) -> String {
        let readable = format!("{LOCK_NAME}:{}.{table}", self.database);
        if readable.len() <= MAX_LOCK_NAME {
            return readable;
        }
        let digest = Sha256::digest(format!("{}\0{table}", self.database).as_bytes());
        format!("{LOCK_NAME}:{}", &hex(&digest)[..40])
    }

    fn lock_error(&self, error: sqlx::Error) -> Error {
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: self.connection.clone(),
            reason: database_message(&error),
        })
    }

    async fn holder_id(&mut self, table: &str) -> Result<Option<i64>> {
        let key = self.key(table);
        sqlx::query_scalar::<_, Option<i64>>("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
            .bind(key)
            .fetch_one(&mut self.conn)
            .await
            .map_err(|e| self.lock_error(e))
    }
}

/// A text column; MariaDB reports some computed text (e.g. CONCAT over casts) as VARBINARY.
fn text_column(row: &sqlx::mysql::MySqlRow, index: usize) -> Result<Option<String>, sqlx::Error> {
    match row.try_get::<Option<String>, _>(index) {
        Ok(value) => Ok(value),
        Err(_) => Ok(row
            .try_get::<Option<Vec<u8>>, _>(index)?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())),
    }
}

#[async_trait]
impl SqlDriver for MySqlDriver {
    fn dialect(&self) -> Dialect {
        Dialect::Mysql
    }

    async fn execute_count(&mut self, sql: &str) -> Result<u64, sqlx::Error> {
        self.conn.execute(sql).await.map(|r| r.rows_affected())
    }

    async fn open_sibling(&self) -> Result<Box<dyn SqlDriver>, sqlx::Error> {
        let mut conn = self.options.connect().await?;
        if let Some(init_sql) = &self.init_sql {
            conn.execute(init_sql.as_str()).await?;
        }
        // Explicitly in the history's database, even if `init_sql` switched to another.
        conn.execute(format!("USE {}", Dialect::Mysql.ident(&self.database)).as_str())
            .await?;
        Ok(Box::new(MySqlDriver {
            conn,
            options: self.options.clone(),
            connection: self.connection.clone(),
            database: self.database.clone(),
            init_sql: self.init_sql.clone(),
        }))
    }

    fn schema(&self) -> Option<&str> {
        Some(&self.database)
    }

    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, sqlx::Error> {
        let rows = self.conn.fetch_all(sql).await?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| row.try_get::<Option<String>, _>(i))
                    .collect()
            })
            .collect()
    }

    fn transactional_ddl(&self) -> bool {
        false
    }

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        Some(self)
    }

    fn connection(&mut self) -> crate::code::Connection<'_> {
        crate::code::Connection::MySql(&mut self.conn)
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}

#[async_trait]
impl SessionLock for MySqlDriver {
    async fn try_lock(&mut self, table: &str) -> Result<bool> {
        let key = self.key(table);
        // Timeout 0: never block inside the server; the engine does the waiting.
        let got: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
            .bind(key)
            .fetch_one(&mut self.conn)
            .await
            .map_err(|e| self.lock_error(e))?;
        Ok(got == Some(1))
    }

    async fn holds_lock(&mut self, table: &str) -> Result<bool> {
        let key = self.key(table);
        let ours: Option<i64> =
            sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) = CONNECTION_ID() AS SIGNED)")
                .bind(key)
                .fetch_one(&mut self.conn)
                .await
                .map_err(|e| self.lock_error(e))?;
        Ok(ours == Some(1))
    }

    async fn unlock(&mut self, table: &str) -> Result<()> {
        let key = self.key(table);
        sqlx::query("SELECT RELEASE_LOCK(?)")
            .bind(key)
            .execute(&mut self.conn)
            .await
            .map(|_| ())
            .map_err(|e| self.lock_error(e))
    }

    async fn holder(&mut self, table: &str) -> Result<Option<LockHolder>> {
        let Some(id) = self.holder_id(table).await? else {
            return Ok(None);
        };
        let row = sqlx::query(
            "SELECT CAST(HOST AS CHAR), CAST(TIME AS SIGNED), CAST(INFO AS CHAR) \
             FROM information_schema.PROCESSLIST WHERE ID = ?",
        )
        .bind(id)
        .fetch_optional(&mut self.conn)
        .await
        .map_err(|e| self.lock_error(e))?;
        let mut holder = LockHolder {
            session_id: Some(id),
            ..LockHolder::default()
        };
        if let Some(row) = row {
            holder.client_address = text_column(&row, 0).ok().flatten();
            let seconds: Option<i64> = row.try_get(1).ok().flatten();
            let info = text_column(&row, 2).ok().flatten();
            // MySQL has no session name others can read (sqlx cannot send connection
            // attributes), so the holder is named by connection id, address and activity.
            holder.activity = Some(match info {
                Some(statement) => {
                    let mut statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
                    statement.truncate(48);
                    format!("busy with `{statement}` for {}s", seconds.unwrap_or(0))
                }
                None => format!("idle for {}s", seconds.unwrap_or(0)),
            });
        }
        Ok(Some(holder))
    }

    async fn force_unlock(&mut self, table: &str) -> Result<Vec<String>> {
        let Some(holder) = self.holder(table).await? else {
            return Ok(Vec::new());
        };
        let id = holder.session_id.unwrap_or_default();
        self.conn
            .execute(format!("KILL CONNECTION {id}").as_str())
            .await
            .map_err(|e| self.lock_error(e))?;
        Ok(vec![format!(
            "terminated connection {id} from {}",
            holder
                .client_address
                .as_deref()
                .unwrap_or("an unknown host")
        )])
    }
}
