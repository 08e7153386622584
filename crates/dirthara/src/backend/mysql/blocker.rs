//! Who holds the metadata lock a step's statement waits for, asked from a second connection
//! while it waits, and — while the step pauses before its next attempt — whether that
//! session's transaction has ended.
//!
//! The server says exactly where it keeps metadata locks: MySQL's `performance_schema`
//! (on by default), or MariaDB's `METADATA_LOCK_INFO` plugin where it is loaded. Neither is
//! there on a default MariaDB, and turning either on takes a server restart; there the
//! blocker is the session most likely to hold the lock, flagged as such: one that is not
//! itself queued for a lock, with a transaction (or a statement) open since before ours
//! began to wait, preferring this database's sessions and then the oldest transaction. The
//! table is the one the waiting statement names, as the process list shows it.

use sqlx::mysql::{MySqlConnection, MySqlRow};
use sqlx::{Executor, Row};

use super::text_column;
use super::waited_table::waited_table;
use crate::backend::sql::SqlDialect;
use crate::backend::sql::SqlSyntax;
use crate::events::Blocker;

/// What every query below selects about the blocker, in this order: its process list row,
/// then the table (as this database names it), its transaction's age in seconds and start.
const BLOCKER_COLUMNS: &str = "CAST(p.ID AS SIGNED), CAST(p.USER AS CHAR), \
     CAST(p.HOST AS CHAR), CAST(p.COMMAND AS CHAR), CAST(p.TIME AS SIGNED), \
     CAST(p.INFO AS CHAR)";
const TRANSACTION_COLUMNS: &str = "CAST(TIMESTAMPDIFF(SECOND, x.trx_started, NOW()) AS SIGNED), \
     CAST(x.trx_started AS CHAR)";

/// The session blocking connection `waiting`, and the table it waits for. `metadata_lock_info`
/// remembers whether MariaDB's plugin is loaded.
pub(super) async fn who_blocks(
    conn: &mut MySqlConnection,
    waiting: i64,
    metadata_lock_info: &mut Option<bool>,
) -> Option<(Option<String>, Blocker)> {
    // What the waiting session runs, for how long it has waited (whole seconds), and whether
    // it waits for a lock at all: a session busy with anything else is blocked by nobody.
    let sql = format!(
        "SELECT CAST(INFO AS CHAR), CAST(TIME AS SIGNED), CAST(DATABASE() AS CHAR), \
         CAST(STATE AS CHAR) FROM information_schema.PROCESSLIST WHERE ID = {waiting}"
    );
    let row = conn.fetch_optional(sql.as_str()).await.ok()??;
    let state = text_column(&row, 3).ok().flatten().unwrap_or_default();
    if !(state.starts_with("Waiting for") && state.contains("lock")) {
        return None;
    }
    let statement = text_column(&row, 0).ok().flatten();
    let waited: i64 = row.try_get::<Option<i64>, _>(1).ok().flatten().unwrap_or(0);
    let here = text_column(&row, 2).ok().flatten().unwrap_or_default();
    let table = statement
        .as_deref()
        .and_then(waited_table)
        .map(|(schema, name)| (schema.unwrap_or_else(|| here.clone()), name));

    if let Some(found) = fetch(conn, &performance_schema(waiting), false).await {
        return Some(found);
    }
    if metadata_lock_info.is_none() {
        let loaded = "SELECT COUNT(*) FROM information_schema.PLUGINS \
                      WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'";
        let count = (conn.fetch_one(loaded).await.ok()).and_then(|r| r.try_get::<i64, _>(0).ok());
        *metadata_lock_info = Some(count.unwrap_or(0) > 0);
    }
    if *metadata_lock_info == Some(true) {
        let sql = from_metadata_lock_info(waiting, table.as_ref());
        if let Some(found) = fetch(conn, &sql, false).await {
            return Some(found);
        }
    }
    let (_, blocker) = fetch(conn, &likely(waiting, waited), true).await?;
    let named = table.map(|(schema, name)| match schema == here {
        true => name,
        false => format!("{schema}.{name}"),
    });
    Some((named, blocker))
}

/// MySQL's `performance_schema.metadata_locks`: the granted lock on the object the waiting
/// connection's pending one is for. Empty (or missing) where `performance_schema` is off.
fn performance_schema(waiting: i64) -> String {
    format!(
        "SELECT {BLOCKER_COLUMNS}, \
         CAST(IF(w.OBJECT_SCHEMA = DATABASE(), w.OBJECT_NAME, \
                 CONCAT(w.OBJECT_SCHEMA, '.', w.OBJECT_NAME)) AS CHAR), {TRANSACTION_COLUMNS} \
         FROM performance_schema.metadata_locks w \
         JOIN performance_schema.threads wt ON wt.THREAD_ID = w.OWNER_THREAD_ID \
         JOIN performance_schema.metadata_locks g ON g.OBJECT_TYPE = w.OBJECT_TYPE \
           AND g.OBJECT_SCHEMA <=> w.OBJECT_SCHEMA AND g.OBJECT_NAME <=> w.OBJECT_NAME \
           AND g.LOCK_STATUS = 'GRANTED' AND g.OWNER_THREAD_ID <> w.OWNER_THREAD_ID \
         JOIN performance_schema.threads gt ON gt.THREAD_ID = g.OWNER_THREAD_ID \
         JOIN information_schema.PROCESSLIST p ON p.ID = gt.PROCESSLIST_ID \
         LEFT JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = p.ID \
         WHERE w.LOCK_STATUS = 'PENDING' AND wt.PROCESSLIST_ID = {waiting} \
         ORDER BY x.trx_started IS NULL, x.trx_started LIMIT 1"
    )
}

/// MariaDB's `information_schema.METADATA_LOCK_INFO` (the `metadata_lock_info` plugin): the
/// sessions holding a lock on the table the statement waits for — named by the statement,
/// else any table the waiting session holds a lock on itself (an `ALTER TABLE` holds one it
/// waits to upgrade).
fn from_metadata_lock_info(waiting: i64, table: Option<&(String, String)>) -> String {
    let on_table = match table {
        Some((schema, name)) => format!(
            "m.TABLE_SCHEMA = {} AND m.TABLE_NAME = {}",
            SqlDialect::MySql.literal(schema),
            SqlDialect::MySql.literal(name)
        ),
        None => format!(
            "(m.TABLE_SCHEMA, m.TABLE_NAME) IN (SELECT TABLE_SCHEMA, TABLE_NAME \
             FROM information_schema.METADATA_LOCK_INFO WHERE THREAD_ID = {waiting} \
             AND LOCK_TYPE = 'Table metadata lock')"
        ),
    };
    format!(
        "SELECT {BLOCKER_COLUMNS}, \
         CAST(IF(m.TABLE_SCHEMA = DATABASE(), m.TABLE_NAME, \
                 CONCAT(m.TABLE_SCHEMA, '.', m.TABLE_NAME)) AS CHAR), {TRANSACTION_COLUMNS} \
         FROM information_schema.METADATA_LOCK_INFO m \
         JOIN information_schema.PROCESSLIST p ON p.ID = m.THREAD_ID \
         LEFT JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = p.ID \
         WHERE m.THREAD_ID <> {waiting} AND m.LOCK_TYPE = 'Table metadata lock' AND {on_table} \
         ORDER BY x.trx_started IS NULL, x.trx_started, p.TIME DESC LIMIT 1"
    )
}

/// Without metadata-lock instrumentation: the session most likely to hold the lock. Not
/// the waiting one, nor this one, nor a session queued for a lock itself (the application's
/// queries behind ours); one whose transaction — or, without one, running statement —
/// began before ours began to wait `waited` seconds ago. This database's sessions first,
/// then the oldest transaction.
fn likely(waiting: i64, waited: i64) -> String {
    format!(
        "SELECT {BLOCKER_COLUMNS}, NULL, {TRANSACTION_COLUMNS} \
         FROM information_schema.PROCESSLIST p \
         LEFT JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = p.ID \
         WHERE p.ID <> {waiting} AND p.ID <> CONNECTION_ID() \
           AND p.COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Killed') \
           AND COALESCE(p.STATE, '') NOT LIKE 'Waiting for%lock%' \
           AND (x.trx_started <= NOW() - INTERVAL {waited} SECOND \
                OR (x.trx_id IS NULL AND p.COMMAND = 'Query' AND p.TIME >= {waited})) \
         ORDER BY p.DB <=> DATABASE() DESC, x.trx_started IS NULL, x.trx_started, \
           p.TIME DESC LIMIT 1"
    )
}

/// Runs one of the queries above: the table it names and the blocker it found.
async fn fetch(
    conn: &mut MySqlConnection,
    sql: &str,
    likely: bool,
) -> Option<(Option<String>, Blocker)> {
    let row = conn.fetch_optional(sql).await.ok()??;
    Some((text_column(&row, 6).ok().flatten(), blocker(&row, likely)))
}

fn blocker(row: &MySqlRow, likely: bool) -> Blocker {
    let seconds = |i: usize| {
        (row.try_get::<Option<i64>, _>(i).ok().flatten())
            .and_then(|s| u64::try_from(s).ok())
            .map(std::time::Duration::from_secs)
    };
    let text = |i: usize| text_column(row, i).ok().flatten();
    let mut blocker = Blocker::default();
    blocker.session_id = row.try_get(0).ok();
    blocker.application = text(1);
    blocker.client_address = text(2);
    blocker.state = text(3).map(|command| match seconds(4) {
        Some(time) => format!("{command} for {}", super::server_seconds(time.as_secs())),
        None => command,
    });
    blocker.transaction_age = seconds(7);
    blocker.query = text(5);
    blocker.likely = likely;
    blocker.transaction = text(8);
    blocker
}

/// Whether the transaction `blocker` held the lock with has ended: no transaction of its
/// session started when that one did. `None` for a blocker that had no transaction.
pub(super) async fn gone(conn: &mut MySqlConnection, blocker: &Blocker) -> Option<bool> {
    let (id, started) = (blocker.session_id?, blocker.transaction.as_deref()?);
    let sql = format!(
        "SELECT COUNT(*) FROM information_schema.INNODB_TRX \
         WHERE trx_mysql_thread_id = {id} AND CAST(trx_started AS CHAR) = {}",
        SqlDialect::MySql.literal(started)
    );
    let open: i64 = conn.fetch_one(sql.as_str()).await.ok()?.try_get(0).ok()?;
    Some(open == 0)
}
