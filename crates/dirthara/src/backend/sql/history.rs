//! The history and meta tables in SQL: how to look at and create them (the rules are in
//! `backend/history_tables.rs`), and reading their rows.

use async_trait::async_trait;

use super::dialect::meta_table;
use super::{grants, SqlBackend, SqlDialect, SqlDriver};
use crate::backend::history_tables::{HistoryTables, Known};
use crate::backend::sql::{HistorySql, SqlSyntax};
use crate::error::{Error, Result};
use crate::history::{AppliedMigration, HistoryDigest, RecordState, RecordedFailure};

#[async_trait]
impl<D: SqlDriver> HistoryTables for SqlBackend<D> {
    fn names(&self) -> (&str, &str) {
        (&self.connection, &self.names.table)
    }

    async fn existing(&mut self) -> Result<(bool, bool)> {
        if self.driver.dialect() == SqlDialect::Postgres {
            match (&self.target_schema, self.driver.schema()) {
                (Some(wanted), _) => {
                    let wanted = wanted.clone();
                    grants::check_schema(&mut self.driver, &self.connection, &wanted, &self.role)
                        .await?;
                }
                (None, None) => return Err(grants::no_usable_schema(&self.connection, &self.role)),
                (None, Some(_)) => {}
            }
        }
        let meta = meta_table(&self.names.table);
        let sql = self.driver.dialect().existing_history_sql(&self.names);
        let rows = self
            .driver
            .fetch_text(&sql)
            .await
            .map_err(|e| self.history_error(e))?;
        let has = |name: &str| {
            rows.iter()
                .any(|r| r.first().and_then(|c| c.as_deref()) == Some(name))
        };
        let history = has(&self.names.table)
            || grants::history_hidden(&mut self.driver, &self.connection, &self.names, &self.role)
                .await?;
        Ok((history, has(&meta)))
    }

    async fn layout_and_digest(&mut self) -> Result<(i64, Option<HistoryDigest>)> {
        let dialect = self.driver.dialect();
        let sql = format!(
            "{}; {}",
            dialect.layout_sql(&self.names),
            dialect.digest_sql(&self.names)
        );
        let rows = (self.driver.fetch_text(&sql).await).map_err(|e| self.history_error(e))?;
        // The layout's row has one column, the digest's four or more.
        let layout = rows.iter().find(|row| row.len() == 1);
        let layout = layout
            .and_then(|row| row[0].as_deref()?.parse().ok())
            .ok_or_else(|| self.no_layout())?;
        let digest = rows.iter().find(|row| row.len() > 1);
        Ok((layout, digest.and_then(|row| parse_digest(dialect, row))))
    }

    async fn layout_version(&mut self) -> Result<i64> {
        self.written_layout().await?.ok_or_else(|| self.no_layout())
    }

    async fn written_layout(&mut self) -> Result<Option<i64>> {
        let sql = self.driver.dialect().layout_sql(&self.names);
        let rows = self
            .driver
            .fetch_text(&sql)
            .await
            .map_err(|e| self.history_error(e))?;
        let value = rows.first().and_then(|r| r.first().cloned().flatten());
        Ok(value.and_then(|v| v.parse().ok()))
    }

    async fn create_meta(&mut self) -> Result<()> {
        let sql = self.driver.dialect().create_meta_sql(&self.names);
        self.driver
            .execute(&sql)
            .await
            .map_err(|e| self.history_error(e))
    }

    async fn write_layout(&mut self) -> Result<()> {
        let sql = self.driver.dialect().layout_row_sql(&self.names);
        self.driver
            .execute(&sql)
            .await
            .map_err(|e| self.history_error(e))
    }

    async fn create_history(&mut self) -> Result<()> {
        let sql = self.driver.dialect().create_history_sql(&self.names);
        self.driver
            .execute(&sql)
            .await
            .map_err(|e| self.history_error(e))
    }

    fn known(&mut self) -> &mut Known {
        &mut self.known
    }

    async fn upgrade(&mut self, from: i64) -> Result<()> {
        let dialect = self.driver.dialect();
        let has_failure = !(self.driver)
            .fetch_text(&dialect.has_failure_column_sql(&self.names))
            .await
            .map_err(|e| self.history_error(e))?
            .is_empty();
        let steps = dialect.upgrade_sql(&self.names, from, has_failure);
        // One transaction where DDL is transactional; on MySQL the ALTER commits by itself,
        // and a run that dies after it finds the column there next time.
        let sql = format!("{}; {}; COMMIT", dialect.begin(), steps.join("; "));
        let sent = self.driver.execute(&sql).await;
        if sent.is_err() {
            self.driver.clean_up_after_failure().await;
        }
        sent.map_err(|e| self.history_error(e))
    }

    async fn select(&mut self, layout: i64) -> Result<Vec<AppliedMigration>> {
        let sql = self
            .driver
            .dialect()
            .select_history_sql(&self.names, layout);
        let rows = self
            .driver
            .fetch_text(&sql)
            .await
            .map_err(|e| self.history_error(e))?;
        rows.into_iter()
            .map(|mut row| {
                parse_history_row(&mut row).ok_or_else(|| {
                    Error::history(
                        &self.connection,
                        format!("`{}` has a malformed row: {row:?}", self.names.table),
                    )
                })
            })
            .collect()
    }
}

impl<D: SqlDriver> SqlBackend<D> {
    fn no_layout(&self) -> Error {
        Error::history(
            &self.connection,
            format!(
                "`{}_meta` has no readable layout_version; it was not written by dirthara",
                self.names.table
            ),
        )
    }
}

/// The digest from its row of text (see [`SqlDialect::digest_sql`]); `None` when a column is
/// not what the query makes.
fn parse_digest(dialect: SqlDialect, row: &[Option<String>]) -> Option<HistoryDigest> {
    let records: u64 = row.first()?.as_deref()?.parse().ok()?;
    let newest = match row.get(1)?.as_deref() {
        Some(text) => Some(text.parse().ok()?),
        None => None,
    };
    let not_applied = row.get(2)?.as_deref()?.parse().ok()?;
    let hashed = row.get(3)?.as_deref().unwrap_or_default();
    let hash = match dialect {
        // SQLite: the joined pairs, hashed here as the other servers hash them.
        SqlDialect::Sqlite => HistoryDigest::hash_pairs(hashed.split(',').map_while(|pair| {
            let (version, checksum) = pair.split_once(':')?;
            Some((version.parse().ok()?, checksum))
        })),
        SqlDialect::Postgres => hashed.to_string(),
        SqlDialect::MySql => hashed.to_string(),
    };
    Some(HistoryDigest {
        records,
        newest,
        not_applied,
        hash,
    })
}

/// A history record from its text columns, which it takes (no copy) once all of them are
/// known to be well-formed; a malformed row is left whole, for the message that shows it.
fn parse_history_row(row: &mut [Option<String>]) -> Option<AppliedMigration> {
    let text = |i: usize| row.get(i)?.as_deref();
    let version = text(0)?.parse().ok()?;
    let batch = text(3)?.parse().ok()?;
    let state = RecordState::parse(text(4)?)?;
    let duration_ms = text(6)?.parse().ok()?;
    text(1)?;
    text(2)?;
    let mut take = |i: usize| row.get_mut(i).and_then(Option::take);
    Some(AppliedMigration {
        version,
        name: take(1)?,
        checksum: take(2)?,
        batch,
        state,
        applied_at: take(5).unwrap_or_default(),
        duration_ms,
        applied_by: take(7).unwrap_or_default(),
        failure: take(8).map(|text| RecordedFailure::from_stored(&text)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_rows_parse_and_malformed_rows_do_not() {
        let row: Vec<Option<String>> = [
            "7",
            "init",
            "ab",
            "2",
            "applied",
            "2024-01-01T00:00:00Z",
            "12",
            "h:1",
        ]
        .iter()
        .map(|s| Some(s.to_string()))
        .chain([None])
        .collect();
        let parsed = parse_history_row(&mut row.clone()).unwrap();
        assert_eq!(
            (parsed.version, parsed.batch, parsed.state),
            (7, 2, RecordState::Applied)
        );
        let mut bad = row.clone();
        bad[4] = Some("exploded".into());
        assert!(parse_history_row(&mut bad).is_none());
        assert_eq!(
            bad[1].as_deref(),
            Some("init"),
            "a malformed row is left whole"
        );
    }
}
