//! The history's existence and layout rules, written once for every backend: a backend says
//! how to look at and create its two tables (or collections), this decides what to do.
//!
//! - `<history>_meta` holds the layout version; a history without it was not created by
//!   dirthara and is refused, a layout newer than this build is refused;
//! - both are created under the lock, meta first (so a crash in between leaves a history
//!   that is still ours); an older layout is upgraded in place under the lock, and read as
//!   it is by the commands that take no lock;
//! - once both are known good on a connection they are not asked about again: only dirthara
//!   creates or drops them, and only under the lock this session holds.

use async_trait::async_trait;

use crate::error::Result;
use crate::history::{check_layout, foreign_history, AppliedMigration, HISTORY_LAYOUT_VERSION};

/// How one backend looks at and creates its history and meta tables.
#[async_trait]
pub(crate) trait HistoryTables: Send {
    /// The connection's configured name and the history table's name, for messages.
    fn names(&self) -> (&str, &str);
    /// Which of the history and its meta table exist.
    async fn existing(&mut self) -> Result<(bool, bool)>;
    /// The meta table's layout version (an error when it has none).
    async fn layout_version(&mut self) -> Result<i64>;
    /// The layout and every record when both tables are there in the current layout, in
    /// one round trip; `None` when either is missing, unreadable or of an older layout (or
    /// the backend cannot ask both at once).
    async fn probe_and_select(&mut self) -> Option<(i64, Vec<AppliedMigration>)> {
        None
    }
    async fn create_meta(&mut self) -> Result<()>;
    async fn create_history(&mut self) -> Result<()>;
    /// Brings a history of layout `from` to the current layout, in place. Called under the
    /// lock; safe to repeat after a run that died half-way.
    async fn upgrade(&mut self, from: i64) -> Result<()>;
    /// Every record, in version order, of a history of layout `layout`.
    async fn select(&mut self, layout: i64) -> Result<Vec<AppliedMigration>>;
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

/// Whether this connection has found its history present and understood, and its layout.
#[derive(Debug, Default)]
pub(crate) struct Known {
    /// The layout of a history found present; `None` until then.
    layout: Option<i64>,
}

impl Known {
    /// Forget what was found (`fresh` dropped the tables).
    pub(crate) fn forget(&mut self) {
        self.layout = None;
    }

    /// The history, or `None` when there is none yet; creates nothing.
    async fn read(
        &mut self,
        tables: &mut dyn HistoryTables,
    ) -> Result<Option<Vec<AppliedMigration>>> {
        if let Some(layout) = self.layout {
            return tables.select(layout).await.map(Some);
        }
        let (history, meta) = tables.existing().await?;
        let (connection, table) = tables.names();
        let (connection, table) = (connection.to_string(), table.to_string());
        let layout = match meta {
            true => {
                let layout = tables.layout_version().await?;
                check_layout(&connection, &table, layout)?;
                layout
            }
            false => HISTORY_LAYOUT_VERSION,
        };
        if !history {
            return Ok(None);
        }
        if !meta {
            return Err(foreign_history(&connection, &table));
        }
        self.layout = Some(layout);
        tables.select(layout).await.map(Some)
    }

    /// Creates what is missing (under the lock), or checks what is there, and returns the
    /// records: every run after the first asks for the layout and the records at once.
    async fn prepare(&mut self, tables: &mut dyn HistoryTables) -> Result<Vec<AppliedMigration>> {
        if self.layout == Some(HISTORY_LAYOUT_VERSION) {
            return tables.select(HISTORY_LAYOUT_VERSION).await;
        }
        let (connection, table) = tables.names();
        let (connection, table) = (connection.to_string(), table.to_string());
        // The usual case, every run after the first: both tables are there. When they are but
        // this fails (a malformed record, an older layout), the look below says exactly what
        // is wrong, or upgrades.
        if let Some((layout, records)) = tables.probe_and_select().await {
            check_layout(&connection, &table, layout)?;
            if layout == HISTORY_LAYOUT_VERSION {
                self.layout = Some(layout);
                return Ok(records);
            }
        }
        let (history, meta) = tables.existing().await?;
        match (history, meta) {
            (true, false) => return Err(foreign_history(&connection, &table)),
            (_, true) => {
                let layout = tables.layout_version().await?;
                check_layout(&connection, &table, layout)?;
                if layout < HISTORY_LAYOUT_VERSION {
                    tables.upgrade(layout).await?;
                }
            }
            (false, false) => tables.create_meta().await?,
        }
        self.layout = Some(HISTORY_LAYOUT_VERSION);
        if history {
            return tables.select(HISTORY_LAYOUT_VERSION).await;
        }
        tables.create_history().await?;
        Ok(Vec::new())
    }
}
