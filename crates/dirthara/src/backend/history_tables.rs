//! The history's existence and layout rules, written once for every backend: a backend says
//! how to look at and create its two tables (or collections), this decides what to do.
//!
//! - `<history>_meta` holds the layout version; a history without it was not created by
//!   dirthara and is refused, a layout newer than this build is refused;
//! - both are created under the lock, meta first (so a crash in between leaves a history
//!   that is still ours, finished by the next locked run — also a meta table whose layout
//!   row a crash kept from being written, where DDL commits on its own); an older layout is upgraded in place under the lock, and read as
//!   it is by the commands that take no lock. Where DDL is not transactional (MySQL) the meta
//!   table is there a moment before its layout row: a reader that finds no history table
//!   reads no records, whatever the meta table holds so far (`wait` looks while a runner
//!   creates them);
//! - once both are known good on a connection they are not asked about again: only dirthara
//!   creates or drops them, and only under the lock this session holds;
//! - existence is asked of the catalog, never found out by a statement that fails: a server
//!   log has no error from dirthara on a first run;
//! - a `migrate` that expects nothing to do asks for the history's digest, not its records
//!   (see [`HistoryDigest`]), and reads the records only when the two differ.

use async_trait::async_trait;

use crate::error::Result;
use crate::history::{AppliedMigration, HistoryDigest, HISTORY_LAYOUT_VERSION};

/// How one backend looks at and creates its history and meta tables.
#[async_trait]
pub(crate) trait HistoryTables: Send {
    /// The connection's configured name and the history table's name, for messages.
    fn names(&self) -> (&str, &str);
    /// Which of the history and its meta table exist.
    async fn existing(&mut self) -> Result<(bool, bool)>;
    /// The meta table's layout version (an error when it has none).
    async fn layout_version(&mut self) -> Result<i64>;
    /// The meta table's layout version; `None` when it has no readable one.
    async fn written_layout(&mut self) -> Result<Option<i64>>;
    /// The meta table's layout version and the history's digest, in one round trip, for
    /// a history whose two tables exist. It reads only columns every layout has, so it never
    /// fails on an older layout. The digest is `None` when the server's answer is not what
    /// the query makes (the records are then read).
    async fn layout_and_digest(&mut self) -> Result<(i64, Option<HistoryDigest>)>;
    async fn create_meta(&mut self) -> Result<()>;
    /// Writes the meta table's layout row into a meta table that has none: finishes a
    /// creation that died between the table and its row (MySQL commits each on its own).
    async fn write_layout(&mut self) -> Result<()>;
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
    match prepare_expecting(tables, None).await? {
        Prepared::Records(records) => Ok(records),
        Prepared::AsExpected => unreachable!("nothing was expected"),
    }
}

/// As [`prepare`]; but when the history is there and its digest is `expected`, says so
/// without reading the records.
pub(crate) async fn prepare_expecting(
    tables: &mut dyn HistoryTables,
    expected: Option<&HistoryDigest>,
) -> Result<Prepared> {
    let mut known = std::mem::take(tables.known());
    let prepared = known.prepare(tables, expected).await;
    *tables.known() = known;
    prepared
}

/// What preparing the history found.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// Every record (none when the history was just created).
    Records(Vec<AppliedMigration>),
    /// The history's digest is the one expected: its records were not read.
    AsExpected,
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
        if !history {
            // No records yet. A meta table without its layout row is a history being created
            // where DDL is not transactional (MySQL commits the table before its row): what
            // `wait` sees while a runner creates it, not a foreign table. A layout newer than
            // this build is still refused.
            if meta {
                if let Some(layout) = tables.written_layout().await? {
                    check_layout(&connection, &table, layout)?;
                }
            }
            return Ok(None);
        }
        let layout = match meta {
            true => {
                let layout = tables.layout_version().await?;
                check_layout(&connection, &table, layout)?;
                layout
            }
            false => HISTORY_LAYOUT_VERSION,
        };
        if !meta {
            return Err(foreign_history(&connection, &table));
        }
        self.layout = Some(layout);
        tables.select(layout).await.map(Some)
    }

    /// Creates what is missing (under the lock), or checks what is there, upgrading an older
    /// layout; then reads the records, unless the digest is `expected`.
    async fn prepare(
        &mut self,
        tables: &mut dyn HistoryTables,
        expected: Option<&HistoryDigest>,
    ) -> Result<Prepared> {
        if self.layout != Some(HISTORY_LAYOUT_VERSION) {
            let (connection, table) = tables.names();
            let (connection, table) = (connection.to_string(), table.to_string());
            let (history, meta) = tables.existing().await?;
            let layout = match (history, meta, expected) {
                (true, false, _) => return Err(foreign_history(&connection, &table)),
                (false, false, _) => {
                    tables.create_meta().await?;
                    None
                }
                (true, true, Some(expected)) => {
                    let (layout, digest) = tables.layout_and_digest().await?;
                    check_layout(&connection, &table, layout)?;
                    if layout == HISTORY_LAYOUT_VERSION && matches(digest, expected) {
                        self.layout = Some(layout);
                        return Ok(Prepared::AsExpected);
                    }
                    Some(layout)
                }
                // No records yet, and a meta table without its layout row: a creation that died
                // between the table and its row (MySQL commits each on its own). Ours: the
                // row is written now, under the lock.
                (false, true, _) => match tables.written_layout().await? {
                    Some(layout) => {
                        check_layout(&connection, &table, layout)?;
                        Some(layout)
                    }
                    None => {
                        tables.write_layout().await?;
                        None
                    }
                },
                (true, true, _) => {
                    let layout = tables.layout_version().await?;
                    check_layout(&connection, &table, layout)?;
                    Some(layout)
                }
            };
            if let Some(older) = layout.filter(|&l| l < HISTORY_LAYOUT_VERSION) {
                tables.upgrade(older).await?;
            }
            self.layout = Some(HISTORY_LAYOUT_VERSION);
            if !history {
                tables.create_history().await?;
                return Ok(Prepared::Records(Vec::new()));
            }
        } else if let Some(expected) = expected {
            let (_, digest) = tables.layout_and_digest().await?;
            if matches(digest, expected) {
                return Ok(Prepared::AsExpected);
            }
        }
        let records = tables.select(HISTORY_LAYOUT_VERSION).await?;
        Ok(Prepared::Records(records))
    }
}

fn matches(digest: Option<HistoryDigest>, expected: &HistoryDigest) -> bool {
    digest.is_some_and(|digest| digest.proves_up_to_date(expected))
}

/// Refuses a history written by a newer dirthara: an older build must not misread or write it.
fn check_layout(connection: &str, table: &str, layout: i64) -> Result<()> {
    if layout > HISTORY_LAYOUT_VERSION {
        return Err(crate::Error::history(
            connection,
            format!(
                "`{table}` was written by a newer dirthara (history layout {layout}; this build \
                 understands up to {HISTORY_LAYOUT_VERSION}). Upgrade dirthara: an older build \
                 must not write to it"
            ),
        ));
    }
    Ok(())
}

/// A table/collection with the history's name that dirthara did not create (no `_meta`).
fn foreign_history(connection: &str, table: &str) -> crate::Error {
    crate::Error::history(
        connection,
        format!(
            "`{table}` exists but was not created by dirthara (there is no `{table}_meta`); \
             choose another name with --history-table / `history_table`"
        ),
    )
}
