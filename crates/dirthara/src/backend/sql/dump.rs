//! `dump` on SQL databases: the objects of the connection's schema (database, on MySQL) read
//! from the catalog, each with a text that two databases built by the same files share.
//! What depends on how a database was built is left out: OIDs, counters (`AUTO_INCREMENT=`),
//! definers, the database's own name, an event's start time. dirthara's own tables (the
//! history, its meta, repeatables, schema snapshot and lease
//! tables) and what belongs to them are left out.

mod postgres;

use super::{SqlBackend, SqlDialect, SqlDriver, SqlSyntax};
use crate::error::{Error, Result};
use crate::history::repeatables_table;
use crate::lock::lease_table;
use crate::schema::{snapshot_table, BaselineFacts, SchemaObject};

use super::dialect::meta_table;

/// An object and the table it belongs to, if any (to leave out what is dirthara's).
type Owned = (SchemaObject, Option<String>);

impl<D: SqlDriver> SqlBackend<D> {
    pub(super) async fn dump_objects(&mut self) -> Result<Vec<SchemaObject>> {
        let table = &self.names.table;
        let own = [
            table.clone(),
            meta_table(table),
            repeatables_table(table),
            snapshot_table(table),
            lease_table(table),
        ];
        let objects = match self.driver.dialect() {
            SqlDialect::Sqlite => self.sqlite_objects().await?,
            SqlDialect::Postgres => self.postgres_objects().await?,
            SqlDialect::MySql => self.mysql_objects().await?,
        };
        Ok(objects
            .into_iter()
            .filter(|(object, owner)| {
                let is_own = |name: &str| own.iter().any(|o| o == name);
                !(owner.as_deref().is_some_and(is_own)
                    || (object.kind == "table" && is_own(&object.key)))
            })
            .map(|(object, _)| object)
            .collect())
    }

    /// What `squash` needs beyond the dump (see [`BaselineFacts`]): on PostgreSQL, the
    /// dependencies the catalog records, and the schema name its definitions carry.
    pub(super) async fn baseline_facts(&mut self) -> Result<BaselineFacts> {
        if self.driver.dialect() != SqlDialect::Postgres {
            return Ok(BaselineFacts::default());
        }
        let schema = match self.driver.schema() {
            Some(schema) => schema.to_string(),
            None => (self
                .rows("SELECT current_schema()")
                .await?
                .into_iter()
                .next())
            .and_then(|row| row.into_iter().next().flatten())
            .unwrap_or_default(),
        };
        let literal = SqlDialect::Postgres.literal(&schema);
        let depends = (self
            .rows(&postgres::dependencies_sql(&literal))
            .await?
            .into_iter())
        .filter_map(|row| match <[_; 4]>::try_from(row) {
            Ok([Some(kind), Some(key), Some(on_kind), Some(on_key)]) => {
                Some(((kind, key), (on_kind, on_key)))
            }
            _ => None,
        })
        .collect();
        Ok(BaselineFacts {
            depends,
            schema: Some(schema),
        })
    }

    async fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        let rows = self.driver.fetch_text(sql).await;
        rows.map_err(|e| self.history_error(e))
    }

    /// `sqlite_master`: every statement as the database keeps it (as written, its head
    /// normalised by SQLite), SQLite's own tables and automatic indexes left out.
    async fn sqlite_objects(&mut self) -> Result<Vec<Owned>> {
        let schema = match self.driver.schema() {
            Some(schema) => SqlDialect::Sqlite.ident(schema),
            None => "main".to_string(),
        };
        let sql = format!(
            "SELECT type, CASE WHEN type IN ('index', 'trigger') THEN tbl_name || '.' || name \
             ELSE name END, sql, tbl_name FROM {schema}.sqlite_master \
             WHERE sql IS NOT NULL AND substr(name, 1, 7) <> 'sqlite_'"
        );
        self.owned_objects(&sql).await
    }

    async fn postgres_objects(&mut self) -> Result<Vec<Owned>> {
        let schema = match self.driver.schema() {
            Some(schema) => SqlDialect::Postgres.literal(schema),
            None => "current_schema()".to_string(),
        };
        self.owned_objects(&postgres::objects_sql(&schema)).await
    }

    /// The objects of a query whose rows are (kind, key, text, the table it belongs to).
    async fn owned_objects(&mut self, sql: &str) -> Result<Vec<Owned>> {
        Ok((self.rows(sql).await?.into_iter())
            .filter_map(|row| match <[_; 4]>::try_from(row) {
                Ok([Some(kind), Some(key), Some(text), owner]) => {
                    Some((SchemaObject::new(kind, key, statement(&text)), owner))
                }
                _ => None,
            })
            .collect())
    }

    /// `SHOW CREATE ...` of every table, view, routine, trigger and event of the database.
    async fn mysql_objects(&mut self) -> Result<Vec<Owned>> {
        let database = match self.driver.schema() {
            Some(schema) => SqlDialect::MySql.literal(schema),
            None => "DATABASE()".to_string(),
        };
        let current = match self.driver.schema() {
            Some(schema) => schema.to_string(),
            None => (self.rows("SELECT DATABASE()").await?.into_iter().next())
                .and_then(|row| row.into_iter().next().flatten())
                .unwrap_or_default(),
        };
        let listing = format!(
            "SELECT CAST(CASE TABLE_TYPE WHEN 'VIEW' THEN 'view' ELSE 'table' END AS CHAR), \
               CAST(TABLE_NAME AS CHAR), NULL, NULL FROM information_schema.TABLES \
               WHERE TABLE_SCHEMA = {database} \
             UNION ALL SELECT CAST(LOWER(ROUTINE_TYPE) AS CHAR), CAST(ROUTINE_NAME AS CHAR), NULL, NULL \
               FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = {database} \
             UNION ALL SELECT CAST('trigger' AS CHAR), CAST(TRIGGER_NAME AS CHAR), \
               CAST(EVENT_OBJECT_TABLE AS CHAR), CAST(CONCAT('CREATE TRIGGER `', TRIGGER_NAME, \
               '` ', ACTION_TIMING, ' ', EVENT_MANIPULATION, ' ON `', EVENT_OBJECT_TABLE, \
               '` FOR EACH ROW ', ACTION_STATEMENT) AS CHAR) FROM information_schema.TRIGGERS \
               WHERE TRIGGER_SCHEMA = {database} \
             UNION ALL SELECT CAST('event' AS CHAR), CAST(EVENT_NAME AS CHAR), NULL, NULL \
               FROM information_schema.EVENTS WHERE EVENT_SCHEMA = {database}"
        );
        let mut objects = Vec::new();
        // Each object's SHOW CREATE, and which column of its row holds the statement (a
        // routine's comes after its sql_mode, an event's after its time zone too).
        let mut shows: Vec<(String, String, Option<String>, String, usize)> = Vec::new();
        for row in self.rows(&listing).await? {
            let [Some(kind), Some(name), owner, written] =
                <[_; 4]>::try_from(row).unwrap_or_default()
            else {
                continue;
            };
            // A trigger is written out from the catalog: SHOW CREATE TRIGGER's row carries a
            // creation time, and its text the definer.
            if let Some(text) = written {
                let key = format!("{}.{name}", owner.as_deref().unwrap_or(""));
                objects.push((SchemaObject::new(kind, key, statement(&text)), owner));
                continue;
            }
            let ident = SqlDialect::MySql.ident(&name);
            let (show, column) = match kind.as_str() {
                "view" => (format!("SHOW CREATE VIEW {ident}"), 1),
                "procedure" => (format!("SHOW CREATE PROCEDURE {ident}"), 2),
                "function" => (format!("SHOW CREATE FUNCTION {ident}"), 2),
                "event" => (format!("SHOW CREATE EVENT {ident}"), 3),
                _ => (format!("SHOW CREATE TABLE {ident}"), 1),
            };
            shows.push((kind, name, owner, show, column));
        }
        // Many SHOW CREATEs to one message (one row each, in order): a schema of 1,000 tables
        // is read in ten round trips, not a thousand.
        for chunk in shows.chunks(SHOWS_PER_MESSAGE) {
            let message: Vec<&str> = chunk.iter().map(|s| s.3.as_str()).collect();
            let rows = self.rows(&message.join("; ")).await?;
            if rows.len() != chunk.len() {
                return Err(Error::history(
                    &self.connection,
                    format!(
                        "SHOW CREATE gave {} rows for {} objects; the schema changed while it was \
                     read: run it again",
                        rows.len(),
                        chunk.len()
                    ),
                ));
            }
            for ((kind, name, owner, _, column), mut row) in chunk.iter().cloned().zip(rows) {
                let Some(text) = row.get_mut(column).and_then(Option::take) else {
                    continue;
                };
                let text = mysql_canonical(&kind, &text, &current);
                let key = match &owner {
                    Some(table) => format!("{table}.{name}"),
                    None => name.clone(),
                };
                let owner = owner.or_else(|| (kind == "table").then(|| name.clone()));
                objects.push((SchemaObject::new(kind, key, statement(&text)), owner));
            }
        }
        Ok(objects)
    }
}

/// How many SHOW CREATE statements go in one message.
const SHOWS_PER_MESSAGE: usize = 100;

/// The statement with one `;` at its end.
fn statement(text: &str) -> String {
    format!("{};", text.trim_end().trim_end_matches(';').trim_end())
}

/// What MySQL and MariaDB print that depends on how the database was built, left out: a
/// table's `AUTO_INCREMENT=n` (its counter), `DEFINER=...` (who ran the migration), a view's
/// defaults (`ALGORITHM=UNDEFINED`, `SQL SECURITY DEFINER`), the database's own name where
/// a view's query qualifies its tables with it, and an event's `STARTS` (the time it was
/// created, unless written).
fn mysql_canonical(kind: &str, text: &str, database: &str) -> String {
    let without_definer = |head: &str| -> String {
        let mut words: Vec<&str> = Vec::new();
        for word in head.split(' ') {
            if word.starts_with("DEFINER=") || word == "ALGORITHM=UNDEFINED" {
                continue;
            }
            words.push(word);
        }
        words.join(" ").replace(" SQL SECURITY DEFINER", "")
    };
    match kind {
        "table" => {
            // The table options are the last line, after the columns' closing parenthesis.
            let (body, options) = text.rsplit_once('\n').unwrap_or(("", text));
            let options: Vec<&str> = (options.split(' '))
                .filter(|word| {
                    let counter = word.strip_prefix("AUTO_INCREMENT=");
                    !counter.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                })
                .collect();
            match body {
                "" => options.join(" "),
                body => format!("{body}\n{}", options.join(" ")),
            }
        }
        "view" => {
            // The head runs to ` VIEW `; the query qualifies names with the database's.
            let (head, query) = text.split_once(" VIEW ").unwrap_or(("", text));
            let qualifier = format!("{}.", SqlDialect::MySql.ident(database));
            format!(
                "{} VIEW {}",
                without_definer(head),
                query.replace(&qualifier, "")
            )
        }
        _ => {
            let marker = match kind {
                "procedure" => " PROCEDURE ",
                "function" => " FUNCTION ",
                "trigger" => " TRIGGER ",
                _ => " EVENT ",
            };
            let Some((head, rest)) = text.split_once(marker) else {
                return text.to_string();
            };
            let mut rest = rest.to_string();
            if kind == "event" {
                rest = without_starts(&rest);
            }
            format!("{}{marker}{rest}", without_definer(head))
        }
    }
}

/// An event's schedule without `STARTS '<time>'`: the server writes the creation time there
/// when the statement named none.
fn without_starts(rest: &str) -> String {
    let Some(at) = rest.find(" STARTS '") else {
        return rest.to_string();
    };
    let after = &rest[at + " STARTS '".len()..];
    match after.find('\'') {
        Some(end) => format!("{}{}", &rest[..at], &after[end + 1..]),
        None => rest.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tables_counter_is_left_out_but_not_its_auto_increment_column() {
        let shown = "CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4";
        assert_eq!(
            mysql_canonical("table", shown, "app"),
            "CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        );
    }

    #[test]
    fn a_views_definer_defaults_and_database_name_are_left_out() {
        let shown = "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v` AS select `app`.`t`.`id` AS `id` from `app`.`t`";
        assert_eq!(
            mysql_canonical("view", shown, "app"),
            "CREATE VIEW `v` AS select `t`.`id` AS `id` from `t`"
        );
        let invoker = "CREATE ALGORITHM=MERGE DEFINER=`u`@`%` SQL SECURITY INVOKER VIEW `v` AS select 1 AS `1`";
        assert_eq!(
            mysql_canonical("view", invoker, "app"),
            "CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW `v` AS select 1 AS `1`"
        );
    }

    #[test]
    fn routines_triggers_and_events_lose_their_definer_and_an_events_start() {
        let trigger = "CREATE DEFINER=`root`@`localhost` TRIGGER t_ins BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1";
        assert_eq!(
            mysql_canonical("trigger", trigger, "app"),
            "CREATE TRIGGER t_ins BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1"
        );
        let event = "CREATE DEFINER=`root`@`%` EVENT `e` ON SCHEDULE EVERY 1 DAY STARTS '2026-12-06 22:00:00' ON COMPLETION NOT PRESERVE ENABLE DO DELETE FROM t";
        assert_eq!(
            mysql_canonical("event", event, "app"),
            "CREATE EVENT `e` ON SCHEDULE EVERY 1 DAY ON COMPLETION NOT PRESERVE ENABLE DO DELETE FROM t"
        );
    }
}
