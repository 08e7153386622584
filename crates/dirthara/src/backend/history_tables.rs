//! The history's existence and layout rules, written once for every backend: a backend says
//! how to look at and create its two tables (or collections), this decides what to do.
//!
//! - `<history>_meta` holds the layout version; a history without it was not created by
//!   dirthara and is refused, a layout newer than this build is refused;
//! - both are created under the lock, meta first (so a crash in between leaves a history
//!   that is still ours);
//! - once both are known good on a connection they are not asked about again: only dirthara
//!   creates or drops them, and only under the lock this session holds.

use async_trait::async_trait;

use crate::error::Result;
use crate::history::{check_layout, foreign_history, AppliedMigration};

/// How one backend looks at and creates its history and meta tables.
#[async_trait]
pub(crate) trait HistoryTables: Send {
    /// The connection's configured name and the history table's name, for messages.
    fn names(&self) -> (&str, &str);
    /// Which of the history and its meta table exist.
    async fn existing(&mut self) -> Result<(bool, bool)>;
    /// The meta table's layout version (an error when it has none).
    async fn layout_version(&mut self) -> Result<i64>;
    /// The layout and every record when both tables are there, in one round trip; `None`
    /// when either is missing or unreadable (or the backend cannot ask both at once).
    async fn probe_and_select(&mut self) -> Option<(i64, Vec<AppliedMigration>)> {
        None
    }
    async fn create_meta(&mut self) -> Result<()>;
    async fn create_history(&mut self) -> Result<()>;
    /// Every record, in version order.
    async fn select(&mut self) -> Result<Vec<AppliedMigration>>;
    /// What this connection has found out about its history so far.
    fn known(&mut self) -> &mut Known;
}

/// The history, or `None` when there is none yet; creates nothing.
pub(crate) async fn read(tables: &mut dyn HistoryTables) -> Result<Option<Vec<AppliedMigration>>> {
    let mut known = std::mem::take(tables.known());
    let read = known.read(tables).await;
    *tables.known() = known;
    read
}

/// Creates what is missing (under the lock), or checks what is there; returns the records.
pub(crate) async fn prepare(tables: &mut dyn HistoryTables) -> Result<Vec<AppliedMigration>> {
    let mut known = std::mem::take(tables.known());
    let prepared = known.prepare(tables).await;
    *tables.known() = known;
    prepared
}

/// Whether this connection has found its history present and understood.
#[derive(Debug, Default)]
pub(crate) struct Known {
    ready: bool,
}

impl Known {
    /// Forget what was found (`fresh` dropped the tables).
    pub(crate) fn forget(&mut self) {
        self.ready = false;
    }

    /// The history, or `None` when there is none yet; creates nothing.
    async fn read(
        &mut self,
        tables: &mut dyn HistoryTables,
    ) -> Result<Option<Vec<AppliedMigration>>> {
        if self.ready {
            return tables.select().await.map(Some);
        }
        let (history, meta) = tables.existing().await?;
        let (connection, table) = tables.names();
        let (connection, table) = (connection.to_string(), table.to_string());
        if meta {
            check_layout(&connection, &table, tables.layout_version().await?)?;
        }
        if !history {
            return Ok(None);
        }
        if !meta {
            return Err(foreign_history(&connection, &table));
        }
        self.ready = true;
        tables.select().await.map(Some)
    }

    /// Creates what is missing (under the lock), or checks what is there, and returns the
    /// records: every run after the first asks for the layout and the records at once.
    async fn prepare(&mut self, tables: &mut dyn HistoryTables) -> Result<Vec<AppliedMigration>> {
        if self.ready {
            return tables.select().await;
        }
        let (connection, table) = tables.names();
        let (connection, table) = (connection.to_string(), table.to_string());
        // The usual case, every run after the first: both tables are there. When they are but
        // this fails (a malformed record), the look below says exactly what is wrong.
        if let Some((layout, records)) = tables.probe_and_select().await {
            check_layout(&connection, &table, layout)?;
            self.ready = true;
            return Ok(records);
        }
        let (history, meta) = tables.existing().await?;
        match (history, meta) {
            (true, false) => return Err(foreign_history(&connection, &table)),
            // Layout 1 is the first; later layouts add their in-place upgrades here.
            (_, true) => check_layout(&connection, &table, tables.layout_version().await?)?,
            (false, false) => tables.create_meta().await?,
        }
        self.ready = true;
        if history {
            return tables.select().await;
        }
        tables.create_history().await?;
        Ok(Vec::new())
    }
}
