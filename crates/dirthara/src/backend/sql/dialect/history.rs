//! The history and meta tables' SQL, per dialect.

use super::{meta_table, SqlDialect, SqlSyntax};
use crate::history::{HistoryChange, NewRecord, HISTORY_LAYOUT_VERSION};

/// The columns a new record is written with.
const RECORD_COLUMNS: &str =
    "version, name, checksum, batch, state, applied_at, duration_ms, applied_by";

const LAYOUT_KEY: &str = "layout_version";

/// The history's tables as dirthara's own statements name them: qualified with the schema
/// (PostgreSQL) or database (MySQL) resolved when the connection opened, so nothing a
/// migration does to its session (`SET search_path`, `USE`) changes where dirthara records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HistoryNames {
    /// The schema/database, as a name (for catalog queries); `None`: the session's default.
    pub schema: Option<String>,
    /// The history table's bare name.
    pub table: String,
    /// The history and meta tables, quoted and qualified, ready to splice into SQL.
    pub history: String,
    pub meta: String,
}

impl HistoryNames {
    pub(crate) fn new(dialect: SqlDialect, schema: Option<&str>, table: &str) -> Self {
        let qualify = |name: &str| match schema {
            Some(schema) => format!("{}.{}", dialect.ident(schema), dialect.ident(name)),
            None => dialect.ident(name),
        };
        HistoryNames {
            schema: schema.map(str::to_string),
            table: table.to_string(),
            history: qualify(table),
            meta: qualify(&meta_table(table)),
        }
    }
}

/// The history and meta tables' statements.
pub(crate) trait HistorySql {
    /// The schema the history lives in, as a literal for a catalog query; `current` (the
    /// session's current one) when the connection named none.
    fn schema_literal(self, names: &HistoryNames, current: &str) -> String;

    /// One row per existing table among the history's tables in its schema, giving its name.
    fn existing_history_sql(self, names: &HistoryNames) -> String;

    fn create_history_sql(self, names: &HistoryNames) -> String;

    /// Upgrades a history of layout `from` to the current layout, in place (under the lock):
    /// each step adds what its layout added, then the meta table says so. A column a run
    /// added before it died (MySQL commits an `ALTER` at once) is not added again:
    /// `has_failure` says whether it is there.
    fn upgrade_sql(self, names: &HistoryNames, from: i64, has_failure: bool) -> Vec<String>;

    /// One row when the history table has the `failure` column (layout 2), asked of the
    /// catalog so that nothing fails when it has not.
    fn has_failure_column_sql(self, names: &HistoryNames) -> String;

    fn create_meta_sql(self, names: &HistoryNames) -> String;

    /// The meta table's layout row, as [`SqlDialect::create_meta_sql`] writes it.
    fn layout_row_sql(self, names: &HistoryNames) -> String;

    fn layout_sql(self, names: &HistoryNames) -> String;

    /// The history's digest ([`HistoryDigest`](crate::history::HistoryDigest)) in one row of
    /// text: the record count, the newest version, how many are not `applied`, and the hash
    /// of `version:checksum` in version order joined by `,` — computed by the server where
    /// it has SHA-256; SQLite, which has none, sends the joined text for us to hash. Reads
    /// only columns every layout has.
    fn digest_sql(self, names: &HistoryNames) -> String;

    /// Every record, in version order, of a history of layout `layout` (a read-only
    /// command reads an older layout as it is: only a locked one upgrades it).
    fn select_history_sql(self, names: &HistoryNames, layout: i64) -> String;

    /// A new record's values, in the order of [`RECORD_COLUMNS`].
    fn record_values(self, record: &NewRecord) -> String;

    /// As [`SqlDialect::change_sql`] for a step's `running` marker (a new record going up, a
    /// state set going down), written only where the SQL `condition` holds.
    fn guarded_change_sql(
        self,
        names: &HistoryNames,
        change: &HistoryChange,
        condition: &str,
    ) -> String;

    fn change_sql(self, names: &HistoryNames, change: &HistoryChange) -> String;
}

impl HistorySql for SqlDialect {
    fn schema_literal(self, names: &HistoryNames, current: &str) -> String {
        (names.schema.as_deref()).map_or_else(|| current.to_string(), |s| self.literal(s))
    }

    fn existing_history_sql(self, names: &HistoryNames) -> String {
        let meta = meta_table(&names.table);
        let list = format!("{}, {}", self.literal(&names.table), self.literal(&meta));
        match self {
            SqlDialect::Sqlite => format!(
                "SELECT name FROM {}.sqlite_master WHERE type = 'table' AND name IN ({list})",
                names
                    .schema
                    .as_deref()
                    .map_or_else(|| "main".to_string(), |s| self.ident(s))
            ),
            SqlDialect::Postgres => format!(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = {} AND table_name IN ({list})",
                self.schema_literal(names, "current_schema()")
            ),
            SqlDialect::MySql => format!(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = {} AND table_name IN ({list})",
                self.schema_literal(names, "DATABASE()")
            ),
        }
    }

    fn create_history_sql(self, names: &HistoryNames) -> String {
        format!(
            "CREATE TABLE {t} (\n\
             \x20 version BIGINT NOT NULL PRIMARY KEY,\n\
             \x20 name VARCHAR(255) NOT NULL,\n\
             \x20 checksum VARCHAR(64) NOT NULL,\n\
             \x20 batch BIGINT NOT NULL,\n\
             \x20 state VARCHAR(16) NOT NULL,\n\
             \x20 applied_at {ts} NOT NULL,\n\
             \x20 duration_ms BIGINT NOT NULL,\n\
             \x20 applied_by VARCHAR(255) NOT NULL,\n\
             \x20 failure TEXT\n)",
            t = names.history,
            ts = self.timestamp_type(),
        )
    }

    fn upgrade_sql(self, names: &HistoryNames, from: i64, has_failure: bool) -> Vec<String> {
        let mut steps = Vec::new();
        if from < 2 && !has_failure {
            steps.push(format!(
                "ALTER TABLE {} ADD COLUMN failure TEXT",
                names.history
            ));
        }
        steps.push(format!(
            "UPDATE {} SET meta_value = {} WHERE meta_key = {}",
            names.meta,
            self.literal(&HISTORY_LAYOUT_VERSION.to_string()),
            self.literal(LAYOUT_KEY)
        ));
        steps
    }

    fn has_failure_column_sql(self, names: &HistoryNames) -> String {
        let table = self.literal(&names.table);
        match self {
            SqlDialect::Sqlite => {
                format!("SELECT name FROM pragma_table_info({table}) WHERE name = 'failure'")
            }
            SqlDialect::Postgres => format!(
                "SELECT column_name::text FROM information_schema.columns WHERE table_schema = {} \
                 AND table_name = {table} AND column_name = 'failure'",
                self.schema_literal(names, "current_schema()")
            ),
            SqlDialect::MySql => format!(
                "SELECT CAST(column_name AS CHAR) FROM information_schema.columns WHERE \
                 table_schema = {} AND table_name = {table} AND column_name = 'failure'",
                self.schema_literal(names, "DATABASE()")
            ),
        }
    }

    fn create_meta_sql(self, names: &HistoryNames) -> String {
        format!(
            "CREATE TABLE {} (meta_key VARCHAR(64) NOT NULL PRIMARY KEY, meta_value VARCHAR(255) NOT NULL);\n{}",
            names.meta,
            self.layout_row_sql(names)
        )
    }

    fn layout_row_sql(self, names: &HistoryNames) -> String {
        format!(
            "INSERT INTO {} (meta_key, meta_value) VALUES ({}, {})",
            names.meta,
            self.literal(LAYOUT_KEY),
            self.literal(&HISTORY_LAYOUT_VERSION.to_string()),
        )
    }

    fn layout_sql(self, names: &HistoryNames) -> String {
        format!(
            "SELECT meta_value FROM {} WHERE meta_key = {}",
            names.meta,
            self.literal(LAYOUT_KEY)
        )
    }

    fn digest_sql(self, names: &HistoryNames) -> String {
        let t = &names.history;
        match self {
            SqlDialect::Postgres => format!(
                "SELECT count(*)::text, max(version)::text, \
                 (count(*) FILTER (WHERE state <> 'applied'))::text, \
                 encode(sha256(convert_to(string_agg(version::text || ':' || checksum, ',' \
                 ORDER BY version), 'UTF8')), 'hex') FROM {t}"
            ),
            // `GROUP_CONCAT` cuts its text at `group_concat_max_len` (1,024 bytes by default
            // on MySQL 8: about 14 records), so the limit is raised for this statement alone
            // and the session's own put back, in the same message. Were the text still cut
            // short, its hash would match no set of files: the records would be read.
            SqlDialect::MySql => format!(
                "SET @dirthara_group_concat_max_len = @@SESSION.group_concat_max_len, \
                 SESSION group_concat_max_len = 4294967295; \
                 SELECT CAST(COUNT(*) AS CHAR), CAST(MAX(version) AS CHAR), \
                 CAST(COALESCE(SUM(state <> 'applied'), 0) AS CHAR), \
                 SHA2(GROUP_CONCAT(CONCAT(version, ':', checksum) ORDER BY version \
                 SEPARATOR ','), 256) FROM {t}; \
                 SET SESSION group_concat_max_len = @dirthara_group_concat_max_len"
            ),
            SqlDialect::Sqlite => format!(
                "SELECT CAST(count(*) AS TEXT), CAST(max(version) AS TEXT), \
                 CAST(coalesce(sum(state <> 'applied'), 0) AS TEXT), \
                 group_concat(version || ':' || checksum, ',' ORDER BY version) FROM {t}"
            ),
        }
    }

    fn select_history_sql(self, names: &HistoryNames, layout: i64) -> String {
        format!(
            "SELECT {}, name, checksum, {}, state, {}, {}, applied_by, {} FROM {} ORDER BY version",
            self.text("version"),
            self.text("batch"),
            self.timestamp_text("applied_at"),
            self.text("duration_ms"),
            if layout >= 2 { "failure" } else { "NULL" },
            names.history
        )
    }

    fn record_values(self, record: &NewRecord) -> String {
        format!(
            "{}, {}, {}, {}, {}, {}, {}, {}",
            record.version,
            self.literal(&record.name),
            self.literal(&record.checksum),
            record.batch,
            self.literal(record.state.as_str()),
            self.now(),
            record
                .duration_ms
                .map_or_else(|| self.elapsed_ms().to_string(), |d| d.to_string()),
            self.literal(&record.applied_by),
        )
    }

    fn guarded_change_sql(
        self,
        names: &HistoryNames,
        change: &HistoryChange,
        condition: &str,
    ) -> String {
        let t = &names.history;
        match change {
            HistoryChange::Insert(record) => format!(
                "INSERT INTO {t} ({RECORD_COLUMNS}) SELECT {} FROM DUAL WHERE {condition}",
                self.record_values(record)
            ),
            HistoryChange::SetState { .. } => {
                format!("{} AND {condition}", self.change_sql(names, change))
            }
            other => unreachable!("a marker is a new record or a state, not {other:?}"),
        }
    }

    fn change_sql(self, names: &HistoryNames, change: &HistoryChange) -> String {
        let t = &names.history;
        match change {
            HistoryChange::Insert(record) => format!(
                "INSERT INTO {t} ({RECORD_COLUMNS}) VALUES ({})",
                self.record_values(record)
            ),
            HistoryChange::MarkApplied {
                version,
                duration_ms,
            } => format!(
                "UPDATE {t} SET state = 'applied', duration_ms = {duration_ms}, applied_at = {}, \
                 failure = NULL WHERE version = {version}",
                self.now()
            ),
            HistoryChange::SetState { version, state } => format!(
                "UPDATE {t} SET state = {}, failure = NULL WHERE version = {version}",
                self.literal(state.as_str())
            ),
            HistoryChange::RecordFailure { version, failure } => format!(
                "UPDATE {t} SET failure = {} WHERE version = {version}",
                self.literal(&failure.to_json())
            ),
            HistoryChange::SetChecksum { version, checksum } => format!(
                "UPDATE {t} SET checksum = {} WHERE version = {version}",
                self.literal(checksum)
            ),
            HistoryChange::Delete { version } => {
                format!("DELETE FROM {t} WHERE version = {version}")
            }
        }
    }
}
