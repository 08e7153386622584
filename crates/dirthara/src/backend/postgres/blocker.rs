//! Who holds the table lock a step's statement waits for, asked from a second connection
//! while it waits (afterwards the wait is over and the server can no longer say), and —
//! while the step pauses before its next attempt — whether that session is done with it.

use std::time::Duration;

use sqlx::postgres::PgConnection;
use sqlx::{Executor, Row};

use crate::backend::sql::SqlDialect;
use crate::backend::sql::SqlSyntax;
use crate::events::Blocker;

/// The session blocking the one named `identity` (its `application_name`), and the table it
/// waits for: `pg_blocking_pids`, then `pg_stat_activity` for the blocker's pid.
pub(super) async fn who_blocks(
    conn: &mut PgConnection,
    identity: &str,
) -> Option<(Option<String>, Blocker)> {
    // The waiting session is found by its application_name, not its pid: through a
    // transaction-pooling proxy it is whichever server session runs the step now.
    let sql = format!(
        "WITH waiting AS (SELECT pid FROM pg_stat_activity WHERE application_name = {} \
         AND wait_event_type = 'Lock') \
         SELECT a.pid::bigint, a.application_name::text, \
         coalesce(host(a.client_addr), 'local socket')::text, a.state::text, \
         (extract(epoch FROM now() - a.xact_start) * 1000)::bigint, left(a.query, 300)::text, \
         (SELECT string_agg(DISTINCT l.relation::regclass::text, ', ') FROM pg_locks l \
          WHERE l.pid IN (SELECT pid FROM waiting) AND NOT l.granted AND l.locktype = 'relation'), \
         a.xact_start::text \
         FROM pg_stat_activity a \
         WHERE a.pid IN (SELECT unnest(pg_blocking_pids(pid)) FROM waiting) \
         ORDER BY a.xact_start NULLS LAST LIMIT 1",
        SqlDialect::Postgres.literal(identity)
    );
    let row = conn.fetch_optional(sql.as_str()).await.ok()??;
    let text = |i: usize| row.try_get::<Option<String>, _>(i).ok().flatten();
    let mut blocker = Blocker::default();
    blocker.session_id = row.try_get(0).ok();
    blocker.application = text(1);
    blocker.client_address = text(2);
    blocker.state = text(3);
    blocker.transaction_age = (row.try_get::<Option<i64>, _>(4).ok().flatten())
        .and_then(|ms| u64::try_from(ms).ok())
        .map(Duration::from_millis);
    blocker.query = text(5);
    blocker.transaction = text(7);
    Some((text(6), blocker))
}

/// Whether the transaction `blocker` held the lock with has ended: its backend is gone, or
/// runs another transaction, or none.
pub(super) async fn gone(conn: &mut PgConnection, blocker: &Blocker) -> Option<bool> {
    let (pid, started) = (blocker.session_id?, blocker.transaction.as_deref()?);
    let sql = format!(
        "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = {pid} \
         AND xact_start::text = {})",
        SqlDialect::Postgres.literal(started)
    );
    conn.fetch_one(sql.as_str()).await.ok()?.try_get(0).ok()
}
