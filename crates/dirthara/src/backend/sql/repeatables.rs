//! The repeatable migrations' records in SQL: `<history>_repeatables`, beside the history
//! table in its schema (database), created the first time a repeatable is applied.

use super::side_tables::{side_table, side_table_exists_sql};
use super::{HistoryNames, SqlBackend, SqlDialect, SqlDriver, SqlSyntax};
use crate::error::Result;
use crate::history::{
    repeatables_table, AppliedRepeatable, RecordState, RecordedFailure, RepeatableChange,
};

fn create_sql(dialect: SqlDialect, names: &HistoryNames) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\n\
         \x20 name VARCHAR(255) NOT NULL PRIMARY KEY,\n\
         \x20 checksum VARCHAR(64) NOT NULL,\n\
         \x20 state VARCHAR(16) NOT NULL,\n\
         \x20 applied_at {} NOT NULL,\n\
         \x20 duration_ms BIGINT NOT NULL,\n\
         \x20 applied_by VARCHAR(255) NOT NULL,\n\
         \x20 failure TEXT\n)",
        side_table(dialect, names, &repeatables_table(&names.table)),
        dialect.timestamp_type()
    )
}

fn select_sql(dialect: SqlDialect, names: &HistoryNames) -> String {
    format!(
        "SELECT name, checksum, state, {}, {}, applied_by, failure FROM {} ORDER BY name",
        dialect.timestamp_text("applied_at"),
        dialect.text("duration_ms"),
        side_table(dialect, names, &repeatables_table(&names.table))
    )
}

/// The statements of `change`, run in one transaction.
fn change_sql(dialect: SqlDialect, names: &HistoryNames, change: &RepeatableChange) -> String {
    let t = side_table(dialect, names, &repeatables_table(&names.table));
    let replace = |name: &str, checksum: &str, state: RecordState, applied_by: &str| {
        format!(
            "{}; DELETE FROM {t} WHERE name = {name}; INSERT INTO {t} (name, checksum, state, \
             applied_at, duration_ms, applied_by) VALUES ({name}, {}, {}, {}, 0, {}); COMMIT",
            dialect.begin(),
            dialect.literal(checksum),
            dialect.literal(state.as_str()),
            dialect.now(),
            dialect.literal(applied_by),
            name = dialect.literal(name),
        )
    };
    match change {
        RepeatableChange::Running {
            name,
            checksum,
            applied_by,
        } => replace(name, checksum, RecordState::Running, applied_by),
        RepeatableChange::Adopted {
            name,
            checksum,
            applied_by,
        } => replace(name, checksum, RecordState::Applied, applied_by),
        RepeatableChange::Applied { name, duration_ms } => format!(
            "UPDATE {t} SET state = 'applied', duration_ms = {duration_ms}, applied_at = {}, \
             failure = NULL WHERE name = {}",
            dialect.now(),
            dialect.literal(name)
        ),
        RepeatableChange::Failed { name, failure } => format!(
            "UPDATE {t} SET failure = {} WHERE name = {}",
            dialect.literal(&failure.to_json()),
            dialect.literal(name)
        ),
    }
}

fn record_of(row: Vec<Option<String>>) -> Option<AppliedRepeatable> {
    let mut row = row.into_iter();
    let mut next = || row.next().flatten();
    let (name, checksum, state) = (next()?, next()?, next()?);
    let mut record = AppliedRepeatable::new(name, checksum, RecordState::parse(&state)?);
    record.applied_at = next().unwrap_or_default();
    record.duration_ms = next().and_then(|d| d.parse().ok()).unwrap_or_default();
    record.applied_by = next().unwrap_or_default();
    record.failure = next().map(|f| RecordedFailure::from_stored(&f));
    Some(record)
}

impl<D: SqlDriver> SqlBackend<D> {
    pub(super) async fn read_repeatable_records(&mut self) -> Result<Vec<AppliedRepeatable>> {
        let dialect = self.driver.dialect();
        let found = (self
            .driver
            .fetch_text(&side_table_exists_sql(
                dialect,
                &self.names,
                &repeatables_table(&self.names.table),
            ))
            .await)
            .map_err(|e| self.history_error(e))?;
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let rows = (self
            .driver
            .fetch_text(&select_sql(dialect, &self.names))
            .await)
            .map_err(|e| self.history_error(e))?;
        Ok(rows.into_iter().filter_map(record_of).collect())
    }

    pub(super) async fn write_repeatable_record(
        &mut self,
        change: &RepeatableChange,
    ) -> Result<()> {
        let dialect = self.driver.dialect();
        if !matches!(
            change,
            RepeatableChange::Applied { .. } | RepeatableChange::Failed { .. }
        ) {
            (self.driver.execute(&create_sql(dialect, &self.names)).await)
                .map_err(|e| self.history_error(e))?;
        }
        let sql = change_sql(dialect, &self.names, change);
        (self.driver.execute(&sql).await).map_err(|e| self.history_error(e))
    }
}
