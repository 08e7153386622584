//! The catalog's SQL, per dialect: the tables that exist, another tool's history read as
//! text, what `fresh` drops and the schemas or databases a fleet lists.

use super::{SqlDialect, SqlSyntax};
use crate::backend::Namespaces;

/// A droppable object found by `fresh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DbObject {
    pub kind: String,
    pub name: String,
}

/// Questions to the catalog, and the drops of `fresh`.
pub(crate) trait CatalogSql {
    /// The schemas of the session's database (PostgreSQL), or the databases of its server,
    /// without the system ones, in name order; `None` where there are none to list.
    fn list_namespaces_sql(self, what: Namespaces) -> Option<String>;

    /// Reads `columns` of `table` (in the session's current schema), every one as text.
    fn read_table_sql(self, table: &str, columns: &[&str], order_by: &str) -> String;

    /// One row per existing table among `names`, giving its name.
    fn existing_tables_sql(self, names: &[&str]) -> String;

    /// Rows of (kind, name) for every object `fresh` drops, in `schema` (`None`: the
    /// session's current one).
    fn list_objects_sql(self, schema: Option<&str>) -> String;

    /// One script dropping `objects` (of `schema`), views before tables, ignoring foreign keys.
    fn drop_sql(self, schema: Option<&str>, objects: &[DbObject]) -> String;

    /// One row (rows, bytes[, relations]), as text, for the table a migration names `table`
    /// (as written, quoted or not, with or without its schema), indexes (and partitions)
    /// included; no row when there is no such table. Rows are `NULL` where the catalog has
    /// no estimate yet. Relations (PostgreSQL): the table, its partitions and children.
    fn table_size_sql(self, table: &str) -> String;
}

impl CatalogSql for SqlDialect {
    fn table_size_sql(self, table: &str) -> String {
        match self {
            // `to_regclass` reads the name as PostgreSQL does, with the session's
            // `search_path`. The partitions and inheritance children (`pg_inherits`, to any
            // depth) are part of its size, and each is a lock an `ALTER` of it takes.
            SqlDialect::Postgres => format!(
                "WITH RECURSIVE tree (oid) AS (SELECT to_regclass({name})::oid \
                 WHERE to_regclass({name}) IS NOT NULL \
                 UNION SELECT i.inhrelid FROM pg_inherits i JOIN tree t ON i.inhparent = t.oid) \
                 SELECT CASE WHEN min(c.reltuples) FILTER (WHERE c.relkind <> 'p') < 0 THEN NULL \
                 ELSE (sum(c.reltuples) FILTER (WHERE c.relkind <> 'p'))::bigint::text END, \
                 sum(pg_total_relation_size(c.oid))::bigint::text, count(*)::text \
                 FROM pg_class c JOIN tree t ON c.oid = t.oid HAVING count(*) > 0",
                name = self.literal(table)
            ),
            SqlDialect::MySql => {
                let parts: Vec<String> = (table.split('.'))
                    .map(|p| p.trim_matches('`').to_string())
                    .collect();
                let (schema, name) = match parts.as_slice() {
                    [schema, name] => (self.literal(schema), self.literal(name)),
                    _ => (
                        "DATABASE()".to_string(),
                        self.literal(table.trim_matches('`')),
                    ),
                };
                format!(
                    "SELECT CAST(TABLE_ROWS AS CHAR), CAST(DATA_LENGTH + INDEX_LENGTH AS CHAR) \
                     FROM information_schema.TABLES WHERE TABLE_SCHEMA = {schema} \
                     AND TABLE_NAME = {name}"
                )
            }
            // Writers wait on the whole file: no table lock queues the application.
            SqlDialect::Sqlite => "SELECT NULL, NULL WHERE 0".to_string(),
        }
    }

    fn list_namespaces_sql(self, what: Namespaces) -> Option<String> {
        let sql: Option<&str> = match (self, what) {
            (SqlDialect::Sqlite, _) => None,
            (SqlDialect::Postgres, Namespaces::Schemas) => Some(
                "SELECT nspname::text FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' \
                 AND nspname <> 'information_schema' ORDER BY 1",
            ),
            (SqlDialect::Postgres, Namespaces::Databases) => Some(
                "SELECT datname::text FROM pg_database WHERE datallowconn AND NOT datistemplate \
                 ORDER BY 1",
            ),
            (SqlDialect::MySql, Namespaces::Databases) => Some(
                "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata WHERE \
                 schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') \
                 ORDER BY 1",
            ),
            // A MySQL schema is a database.
            (SqlDialect::MySql, Namespaces::Schemas) => None,
        };
        sql.map(str::to_string)
    }

    fn read_table_sql(self, table: &str, columns: &[&str], order_by: &str) -> String {
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

    fn existing_tables_sql(self, names: &[&str]) -> String {
        let list: Vec<String> = names.iter().map(|n| self.literal(n)).collect();
        let list = list.join(", ");
        match self {
            SqlDialect::Sqlite => {
                format!("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({list})")
            }
            SqlDialect::Postgres => format!(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name IN ({list})"
            ),
            SqlDialect::MySql => format!(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name IN ({list})"
            ),
        }
    }

    fn list_objects_sql(self, schema: Option<&str>) -> String {
        match self {
            // SQLite's own tables (`sqlite_sequence`, `sqlite_stat1`) by their exact prefix:
            // in `LIKE 'sqlite_%'` the `_` would match any character (`sqlitex`).
            SqlDialect::Sqlite => format!(
                "SELECT type, name FROM {}.sqlite_master WHERE type IN ('table', 'view') \
                 AND substr(name, 1, 7) <> 'sqlite_'",
                schema.map_or_else(|| "main".to_string(), |s| self.ident(s))
            ),
            SqlDialect::Postgres => {
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
            SqlDialect::MySql => {
                let schema = schema.map_or_else(|| "DATABASE()".to_string(), |s| self.literal(s));
                format!(
                    "SELECT CASE table_type WHEN 'VIEW' THEN 'view' ELSE 'table' END, CAST(table_name AS CHAR) \
                     FROM information_schema.tables WHERE table_schema = {schema}"
                )
            }
        }
    }

    fn drop_sql(self, schema: Option<&str>, objects: &[DbObject]) -> String {
        let mut statements = Vec::new();
        if self == SqlDialect::MySql {
            statements.push("SET FOREIGN_KEY_CHECKS = 0".to_string());
        }
        if self == SqlDialect::Sqlite {
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
                    Some(schema) if !(self == SqlDialect::Sqlite) => {
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
                SqlDialect::Sqlite => statements.extend(
                    names
                        .iter()
                        .map(|n| format!("DROP {keyword} IF EXISTS {n}")),
                ),
                SqlDialect::Postgres => statements.push(format!(
                    "DROP {keyword} IF EXISTS {} CASCADE",
                    names.join(", ")
                )),
                SqlDialect::MySql => {
                    statements.push(format!("DROP {keyword} IF EXISTS {}", names.join(", ")))
                }
            }
        }
        if self == SqlDialect::MySql {
            statements.push("SET FOREIGN_KEY_CHECKS = 1".to_string());
        }
        if self == SqlDialect::Sqlite {
            statements.push("PRAGMA foreign_keys = ON".to_string());
        }
        statements.join(";\n")
    }
}
