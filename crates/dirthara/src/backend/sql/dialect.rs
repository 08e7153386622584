//! The SQL text of dirthara's own statements, per dialect: the history and meta tables
//! (always named with the schema resolved at connect), the lease table, and what `fresh`
//! drops. Values spliced in are integers, hex checksums and names from a safe alphabet, and
//! are still quoted with [`Dialect::literal`].

use crate::backend::Namespaces;
use crate::history::{HistoryChange, NewRecord, HISTORY_LAYOUT_VERSION};

/// The columns a new record is written with.
const RECORD_COLUMNS: &str =
    "version, name, checksum, batch, state, applied_at, duration_ms, applied_by";

/// The SQL flavour of a backend: one variant for each SQL backend this build has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    #[cfg(feature = "sqlite")]
    Sqlite,
    #[cfg(feature = "postgres")]
    Postgres,
    #[cfg(feature = "mysql")]
    Mysql,
}

/// A droppable object found by `fresh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DbObject {
    pub kind: String,
    pub name: String,
}

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
    pub(crate) fn new(dialect: Dialect, schema: Option<&str>, table: &str) -> Self {
        let qualify = |name: &str| match schema {
            Some(schema) => format!("{}.{}", dialect.ident(schema), dialect.ident(name)),
            None => dialect.ident(name),
        };
        HistoryNames {
            schema: schema.map(str::to_string),
            table: table.to_string(),
            history: qualify(table),
            meta: qualify(&Dialect::meta_table(table)),
        }
    }
}

impl Dialect {
    /// MySQL/MariaDB, whose identifiers and literals quote differently.
    #[cfg(feature = "mysql")]
    fn is_mysql(self) -> bool {
        self == Dialect::Mysql
    }

    #[cfg(not(feature = "mysql"))]
    fn is_mysql(self) -> bool {
        false
    }

    #[cfg(feature = "sqlite")]
    pub(crate) fn is_sqlite(self) -> bool {
        self == Dialect::Sqlite
    }

    #[cfg(not(feature = "sqlite"))]
    pub(crate) fn is_sqlite(self) -> bool {
        false
    }

    pub(crate) fn ident(self, name: &str) -> String {
        if self.is_mysql() {
            format!("`{}`", name.replace('`', "``"))
        } else {
            format!("\"{}\"", name.replace('"', "\"\""))
        }
    }

    pub(crate) fn literal(self, value: &str) -> String {
        let mut escaped = value.replace('\'', "''");
        if self.is_mysql() {
            // MySQL treats backslash as an escape inside literals unless NO_BACKSLASH_ESCAPES.
            escaped = escaped.replace('\\', "\\\\");
        }
        format!("'{escaped}'")
    }

    pub(crate) fn now(self) -> &'static str {
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')",
            #[cfg(feature = "postgres")]
            Dialect::Postgres => "now()",
            #[cfg(feature = "mysql")]
            Dialect::Mysql => "UTC_TIMESTAMP()",
        }
    }

    /// Milliseconds since the current statement (the whole multi-statement string) began;
    /// only PostgreSQL can tell, and only its atomic path leaves the duration unmeasured.
    pub(crate) fn elapsed_ms(self) -> &'static str {
        match self {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => {
                "(EXTRACT(EPOCH FROM clock_timestamp() - statement_timestamp()) * 1000)::bigint"
            }
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => "0",
            #[cfg(feature = "mysql")]
            Dialect::Mysql => "0",
        }
    }

    pub(crate) fn timestamp_type(self) -> &'static str {
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => "TEXT",
            #[cfg(feature = "postgres")]
            Dialect::Postgres => "TIMESTAMPTZ",
            #[cfg(feature = "mysql")]
            Dialect::Mysql => "DATETIME",
        }
    }

    /// `expr` as text in every dialect, so rows decode the same way everywhere.
    pub(crate) fn text(self, expr: &str) -> String {
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => format!("CAST({expr} AS TEXT)"),
            #[cfg(feature = "postgres")]
            Dialect::Postgres => format!("({expr})::text"),
            #[cfg(feature = "mysql")]
            Dialect::Mysql => format!("CAST({expr} AS CHAR)"),
        }
    }

    pub(crate) fn timestamp_text(self, column: &str) -> String {
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => column.to_string(),
            #[cfg(feature = "postgres")]
            Dialect::Postgres => {
                format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')")
            }
            #[cfg(feature = "mysql")]
            Dialect::Mysql => format!("DATE_FORMAT({column}, '%Y-%m-%dT%H:%i:%sZ')"),
        }
    }

    pub(crate) fn begin(self) -> &'static str {
        match self {
            // IMMEDIATE takes SQLite's write lock up front, so a concurrent writer cannot make
            // the transaction fail half-way when it upgrades from reading to writing.
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            #[cfg(feature = "postgres")]
            Dialect::Postgres => "BEGIN",
            #[cfg(feature = "mysql")]
            Dialect::Mysql => "BEGIN",
        }
    }

    /// The schema the history lives in, as a literal for a catalog query; `current` (the
    /// session's current one) when the connection named none.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    fn schema_literal(self, names: &HistoryNames, current: &str) -> String {
        (names.schema.as_deref()).map_or_else(|| current.to_string(), |s| self.literal(s))
    }

    pub(crate) fn meta_table(table: &str) -> String {
        format!("{table}_meta")
    }

    /// One row per existing table among the history's tables in its schema, giving its name.
    pub(crate) fn existing_history_sql(self, names: &HistoryNames) -> String {
        let meta = Self::meta_table(&names.table);
        let list = format!("{}, {}", self.literal(&names.table), self.literal(&meta));
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => format!(
                "SELECT name FROM {}.sqlite_master WHERE type = 'table' AND name IN ({list})",
                names
                    .schema
                    .as_deref()
                    .map_or_else(|| "main".to_string(), |s| self.ident(s))
            ),
            #[cfg(feature = "postgres")]
            Dialect::Postgres => format!(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = {} AND table_name IN ({list})",
                self.schema_literal(names, "current_schema()")
            ),
            #[cfg(feature = "mysql")]
            Dialect::Mysql => format!(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = {} AND table_name IN ({list})",
                self.schema_literal(names, "DATABASE()")
            ),
        }
    }

    /// The schemas of the session's database (PostgreSQL), or the databases of its server,
    /// without the system ones, in name order; `None` where there are none to list.
    pub(crate) fn list_namespaces_sql(self, what: Namespaces) -> Option<String> {
        let sql: Option<&str> = match (self, what) {
            #[cfg(feature = "sqlite")]
            (Dialect::Sqlite, _) => None,
            #[cfg(feature = "postgres")]
            (Dialect::Postgres, Namespaces::Schemas) => Some(
                "SELECT nspname::text FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' \
                 AND nspname <> 'information_schema' ORDER BY 1",
            ),
            #[cfg(feature = "postgres")]
            (Dialect::Postgres, Namespaces::Databases) => Some(
                "SELECT datname::text FROM pg_database WHERE datallowconn AND NOT datistemplate \
                 ORDER BY 1",
            ),
            #[cfg(feature = "mysql")]
            (Dialect::Mysql, Namespaces::Databases) => Some(
                "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata WHERE \
                 schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') \
                 ORDER BY 1",
            ),
            // A MySQL schema is a database.
            #[cfg(feature = "mysql")]
            (Dialect::Mysql, Namespaces::Schemas) => None,
        };
        sql.map(str::to_string)
    }

    /// The database's name in messages.
    pub(crate) fn database_name(self) -> &'static str {
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => "SQLite",
            #[cfg(feature = "postgres")]
            Dialect::Postgres => "PostgreSQL",
            #[cfg(feature = "mysql")]
            Dialect::Mysql => "MySQL/MariaDB",
        }
    }

    /// Reads `columns` of `table` (in the session's current schema), every one as text.
    pub(crate) fn read_table_sql(self, table: &str, columns: &[&str], order_by: &str) -> String {
        let list: Vec<String> = (columns.iter())
            .map(|c| self.text(&self.ident(c)))
            .collect();
        format!(
            "SELECT {} FROM {} ORDER BY {}",
            list.join(", "),
            self.ident(table),
            self.ident(order_by)
        )
    }

    /// One row per existing table among `names`, giving its name.
    pub(crate) fn existing_tables_sql(self, names: &[&str]) -> String {
        let list: Vec<String> = names.iter().map(|n| self.literal(n)).collect();
        let list = list.join(", ");
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => {
                format!("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({list})")
            }
            #[cfg(feature = "postgres")]
            Dialect::Postgres => format!(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name IN ({list})"
            ),
            #[cfg(feature = "mysql")]
            Dialect::Mysql => format!(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name IN ({list})"
            ),
        }
    }

    pub(crate) fn create_history_sql(self, names: &HistoryNames) -> String {
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

    /// Upgrades a history of layout `from` to the current layout, in place (under the lock):
    /// each step adds what its layout added, then the meta table says so. A column a run
    /// added before it died (MySQL commits an `ALTER` at once) is not added again:
    /// `has_failure` says whether it is there.
    pub(crate) fn upgrade_sql(
        self,
        names: &HistoryNames,
        from: i64,
        has_failure: bool,
    ) -> Vec<String> {
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

    /// One row when the history table has the `failure` column (layout 2), asked of the
    /// catalog so that nothing fails when it has not.
    pub(crate) fn has_failure_column_sql(self, names: &HistoryNames) -> String {
        let table = self.literal(&names.table);
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => {
                format!("SELECT name FROM pragma_table_info({table}) WHERE name = 'failure'")
            }
            #[cfg(feature = "postgres")]
            Dialect::Postgres => format!(
                "SELECT column_name::text FROM information_schema.columns WHERE table_schema = {} \
                 AND table_name = {table} AND column_name = 'failure'",
                self.schema_literal(names, "current_schema()")
            ),
            #[cfg(feature = "mysql")]
            Dialect::Mysql => format!(
                "SELECT CAST(column_name AS CHAR) FROM information_schema.columns WHERE \
                 table_schema = {} AND table_name = {table} AND column_name = 'failure'",
                self.schema_literal(names, "DATABASE()")
            ),
        }
    }

    pub(crate) fn create_meta_sql(self, names: &HistoryNames) -> String {
        format!(
            "CREATE TABLE {} (meta_key VARCHAR(64) NOT NULL PRIMARY KEY, meta_value VARCHAR(255) NOT NULL);\n{}",
            names.meta,
            self.layout_row_sql(names)
        )
    }

    /// The meta table's layout row, as [`Dialect::create_meta_sql`] writes it.
    pub(crate) fn layout_row_sql(self, names: &HistoryNames) -> String {
        format!(
            "INSERT INTO {} (meta_key, meta_value) VALUES ({}, {})",
            names.meta,
            self.literal(LAYOUT_KEY),
            self.literal(&HISTORY_LAYOUT_VERSION.to_string()),
        )
    }

    pub(crate) fn layout_sql(self, names: &HistoryNames) -> String {
        format!(
            "SELECT meta_value FROM {} WHERE meta_key = {}",
            names.meta,
            self.literal(LAYOUT_KEY)
        )
    }

    /// The history's digest ([`HistoryDigest`](crate::history::HistoryDigest)) in one row of
    /// text: the record count, the newest version, how many are not `applied`, and the hash
    /// of `version:checksum` in version order joined by `,` — computed by the server where
    /// it has SHA-256; SQLite, which has none, sends the joined text for us to hash. Reads
    /// only columns every layout has.
    pub(crate) fn digest_sql(self, names: &HistoryNames) -> String {
        let t = &names.history;
        match self {
            #[cfg(feature = "postgres")]
            Dialect::Postgres => format!(
                "SELECT count(*)::text, max(version)::text, \
                 (count(*) FILTER (WHERE state <> 'applied'))::text, \
                 encode(sha256(convert_to(string_agg(version::text || ':' || checksum, ',' \
                 ORDER BY version), 'UTF8')), 'hex') FROM {t}"
            ),
            // `GROUP_CONCAT` cuts its text at `group_concat_max_len` (1,024 bytes by default
            // on MySQL 8: about 14 records), so the limit is raised for this statement alone
            // and the session's own put back, in the same message. Were the text still cut
            // short, its hash would match no set of files: the records would be read.
            #[cfg(feature = "mysql")]
            Dialect::Mysql => format!(
                "SET @dirthara_group_concat_max_len = @@SESSION.group_concat_max_len, \
                 SESSION group_concat_max_len = 4294967295; \
                 SELECT CAST(COUNT(*) AS CHAR), CAST(MAX(version) AS CHAR), \
                 CAST(COALESCE(SUM(state <> 'applied'), 0) AS CHAR), \
                 SHA2(GROUP_CONCAT(CONCAT(version, ':', checksum) ORDER BY version \
                 SEPARATOR ','), 256) FROM {t}; \
                 SET SESSION group_concat_max_len = @dirthara_group_concat_max_len"
            ),
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => format!(
                "SELECT CAST(count(*) AS TEXT), CAST(max(version) AS TEXT), \
                 CAST(coalesce(sum(state <> 'applied'), 0) AS TEXT), \
                 group_concat(version || ':' || checksum, ',' ORDER BY version) FROM {t}"
            ),
        }
    }

    /// Every record, in version order, of a history of layout `layout` (a read-only
    /// command reads an older layout as it is: only a locked one upgrades it).
    pub(crate) fn select_history_sql(self, names: &HistoryNames, layout: i64) -> String {
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

    /// A new record's values, in the order of [`RECORD_COLUMNS`].
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

    /// As [`Dialect::change_sql`] for a step's `running` marker (a new record going up, a
    /// state set going down), written only where the SQL `condition` holds.
    pub(crate) fn guarded_change_sql(
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

    pub(crate) fn change_sql(self, names: &HistoryNames, change: &HistoryChange) -> String {
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

    /// Rows of (kind, name) for every object `fresh` drops, in `schema` (`None`: the
    /// session's current one).
    pub(crate) fn list_objects_sql(self, schema: Option<&str>) -> String {
        match self {
            #[cfg(feature = "sqlite")]
            Dialect::Sqlite => format!(
                "SELECT type, name FROM {}.sqlite_master WHERE type IN ('table', 'view') \
                 AND name NOT LIKE 'sqlite_%'",
                schema.map_or_else(|| "main".to_string(), |s| self.ident(s))
            ),
            #[cfg(feature = "postgres")]
            Dialect::Postgres => {
                let schema =
                    schema.map_or_else(|| "current_schema()".to_string(), |s| self.literal(s));
                format!(
                    "SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' \
                     WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' ELSE 'table' END, c.relname::text \
                     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = {schema} AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') \
                     AND NOT c.relispartition \
                     UNION ALL \
                     SELECT 'type', t.typname::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace \
                     WHERE n.nspname = {schema} AND (t.typtype IN ('e', 'd') OR (t.typtype = 'c' AND \
                     (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c'))"
                )
            }
            #[cfg(feature = "mysql")]
            Dialect::Mysql => {
                let schema = schema.map_or_else(|| "DATABASE()".to_string(), |s| self.literal(s));
                format!(
                    "SELECT CASE table_type WHEN 'VIEW' THEN 'view' ELSE 'table' END, CAST(table_name AS CHAR) \
                     FROM information_schema.tables WHERE table_schema = {schema}"
                )
            }
        }
    }

    /// One script dropping `objects` (of `schema`), views before tables, ignoring foreign keys.
    pub(crate) fn drop_sql(self, schema: Option<&str>, objects: &[DbObject]) -> String {
        let mut statements = Vec::new();
        if self.is_mysql() {
            statements.push("SET FOREIGN_KEY_CHECKS = 0".to_string());
        }
        if self.is_sqlite() {
            statements.push("PRAGMA foreign_keys = OFF".to_string());
        }
        for kind in [
            "view",
            "materialized view",
            "table",
            "foreign table",
            "sequence",
            "type",
        ] {
            let names: Vec<String> = objects
                .iter()
                .filter(|o| o.kind == kind)
                .map(|o| match schema {
                    // SQLite's `DROP ... main.t` is fine, but keep its statements plain.
                    Some(schema) if !self.is_sqlite() => {
                        format!("{}.{}", self.ident(schema), self.ident(&o.name))
                    }
                    _ => self.ident(&o.name),
                })
                .collect();
            if names.is_empty() {
                continue;
            }
            let keyword = kind.to_ascii_uppercase();
            match self {
                // SQLite drops one object per statement and has no CASCADE.
                #[cfg(feature = "sqlite")]
                Dialect::Sqlite => statements.extend(
                    names
                        .iter()
                        .map(|n| format!("DROP {keyword} IF EXISTS {n}")),
                ),
                #[cfg(feature = "postgres")]
                Dialect::Postgres => statements.push(format!(
                    "DROP {keyword} IF EXISTS {} CASCADE",
                    names.join(", ")
                )),
                #[cfg(feature = "mysql")]
                Dialect::Mysql => {
                    statements.push(format!("DROP {keyword} IF EXISTS {}", names.join(", ")))
                }
            }
        }
        if self.is_mysql() {
            statements.push("SET FOREIGN_KEY_CHECKS = 1".to_string());
        }
        if self.is_sqlite() {
            statements.push("PRAGMA foreign_keys = ON".to_string());
        }
        statements.join(";\n")
    }
}
