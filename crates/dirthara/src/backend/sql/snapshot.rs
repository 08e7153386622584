//! The schema snapshot in SQL: one row of `<history>_schema`, beside the history in its
//! schema (database), created the first time a snapshot is written.

use super::side_tables::{side_table, side_table_exists_sql};
use super::{HistoryNames, SqlBackend, SqlDialect, SqlDriver, SqlSyntax};
use crate::error::Result;
use crate::schema::{snapshot_table, StoredSnapshot};

fn table(dialect: SqlDialect, names: &HistoryNames) -> String {
    side_table(dialect, names, &snapshot_table(&names.table))
}

fn create_sql(dialect: SqlDialect, names: &HistoryNames) -> String {
    // MySQL's TEXT holds 64 KiB; a large schema's compressed dump can be more.
    let body = if dialect == SqlDialect::MySql {
        "LONGTEXT"
    } else {
        "TEXT"
    };
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\n\
         \x20 id INT NOT NULL PRIMARY KEY,\n\
         \x20 version BIGINT,\n\
         \x20 server VARCHAR(255) NOT NULL,\n\
         \x20 taken_at VARCHAR(64) NOT NULL,\n\
         \x20 sha256 VARCHAR(64) NOT NULL,\n\
         \x20 body {body} NOT NULL\n)",
        table(dialect, names)
    )
}

impl<D: SqlDriver> SqlBackend<D> {
    pub(super) async fn read_stored_snapshot(&mut self) -> Result<Option<StoredSnapshot>> {
        let dialect = self.driver.dialect();
        let exists =
            side_table_exists_sql(dialect, &self.names, &snapshot_table(&self.names.table));
        let found = self.driver.fetch_text(&exists).await;
        if found.map_err(|e| self.history_error(e))?.is_empty() {
            return Ok(None);
        }
        let select = format!(
            "SELECT {}, server, taken_at, sha256, body FROM {} WHERE id = 1",
            dialect.text("version"),
            table(dialect, &self.names)
        );
        let rows = self.driver.fetch_text(&select).await;
        let rows = rows.map_err(|e| self.history_error(e))?;
        Ok(rows.into_iter().next().map(|row| {
            let mut row = row.into_iter();
            let mut next = || row.next().flatten().unwrap_or_default();
            StoredSnapshot {
                version: next().parse().ok(),
                server: next(),
                taken_at: next(),
                sha256: next(),
                body: next(),
            }
        }))
    }

    pub(super) async fn write_stored_snapshot(&mut self, snapshot: &StoredSnapshot) -> Result<()> {
        let dialect = self.driver.dialect();
        // Created only when missing: CREATE ... IF NOT EXISTS asks for the right to create
        // even when the table is there, which a role that may only write it lacks.
        let exists =
            side_table_exists_sql(dialect, &self.names, &snapshot_table(&self.names.table));
        let found = self.driver.fetch_text(&exists).await;
        if found.map_err(|e| self.history_error(e))?.is_empty() {
            let created = self.driver.execute(&create_sql(dialect, &self.names)).await;
            created.map_err(|e| self.history_error(e))?;
        }
        let t = table(dialect, &self.names);
        let version = snapshot
            .version
            .map_or("NULL".to_string(), |v| v.to_string());
        let sql = format!(
            "{}; DELETE FROM {t}; INSERT INTO {t} (id, version, server, taken_at, sha256, body) \
             VALUES (1, {version}, {}, {}, {}, {}); COMMIT",
            dialect.begin(),
            dialect.literal(&snapshot.server),
            dialect.literal(&snapshot.taken_at),
            dialect.literal(&snapshot.sha256),
            dialect.literal(&snapshot.body),
        );
        let written = self.driver.execute(&sql).await;
        written.map_err(|e| self.history_error(e))
    }

    pub(super) async fn forget_stored_snapshot(&mut self) -> Result<()> {
        let dialect = self.driver.dialect();
        let exists =
            side_table_exists_sql(dialect, &self.names, &snapshot_table(&self.names.table));
        let found = self.driver.fetch_text(&exists).await;
        if found.map_err(|e| self.history_error(e))?.is_empty() {
            return Ok(());
        }
        let deleted = (self.driver)
            .execute(&format!("DELETE FROM {}", table(dialect, &self.names)))
            .await;
        deleted.map_err(|e| self.history_error(e))
    }
}
