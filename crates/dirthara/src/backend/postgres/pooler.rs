//! Is the lock connection a server session of its own? A transaction-pooling proxy (PgBouncer
//! `pool_mode = transaction`, pgcat, RDS Proxy, Supavisor) runs each transaction in whichever
//! server session is free, so a session-level advisory lock taken in one transaction belongs
//! to a server session that the next transaction may not reach — and that another client's
//! transaction may. Advisory locks are re-entrant within a server session, so such a client
//! would "take" the lock we hold. Nothing in the protocol says reliably that a proxy is there,
//! so the lock is taken only in a server session that proves, transaction after transaction,
//! to be ours alone:
//!
//! - each of our connections stamps its server session with a random token (a session-level
//!   setting), and every later statement of the check reads it back with the server's process
//!   id: a different token or process means consecutive transactions ran in different sessions;
//! - a second connection, open at the same time, stamps its own: two live connections never
//!   share a server session, so seeing the other's token or process id means they do;
//! - the lock is taken in the same statement that checks the token, and only if this server
//!   session does not hold it already — holding it without having taken it means another
//!   client shares the session;
//! - once taken, a separate transaction confirms the same server session still holds it, and
//!   the second connection confirms its own session does not.
//!
//! An idle proxy usually hands a released server session to the next client that asks, so the
//! second connection lands on the first one's session and the check trips before the lock is
//! even tried. A busy proxy shuffles sessions, which trips the token checks. Only statements in
//! plain text (the simple-query protocol) are sent: no prepared statement is left behind.

use sqlx::postgres::{PgConnectOptions, PgConnection, PgRow};
use sqlx::{Connection, Executor, Row};

use super::super::sql::SqlDialect;
use crate::backend::sql::SqlSyntax;

/// The session-level setting our tokens live in (a custom setting: any user may set it).
const TOKEN_SETTING: &str = "dirthara.session_token";

/// How many times each connection reads its token back, in a transaction of its own, before
/// the lock is tried. One is enough to add: the lock attempt and its confirmation read the
/// lock connection's token back again (and the confirmation the second connection's), each in
/// a transaction of its own, so the lock connection is still checked in three transactions
/// after its stamp and the second connection in two.
const ROUNDS: usize = 1;

/// Why the check stopped.
pub(super) enum Suspect {
    /// What we saw that a server session of our own cannot produce.
    Shared(String),
    Database(sqlx::Error),
}

impl From<sqlx::Error> for Suspect {
    fn from(error: sqlx::Error) -> Self {
        Suspect::Database(error)
    }
}

/// One connection's stamp: the server process that ran it, and the token it left there.
struct Stamp {
    pid: i64,
    token: String,
}

/// The check's state between the lock attempts of one runner.
pub(super) struct SessionCheck {
    main: Stamp,
    /// Open until the wait is over (closed then, after the lock is reported taken: a waiter
    /// woken by the release does not make the hand-over wait for a goodbye).
    sibling: Option<(PgConnection, Stamp)>,
    /// The lock was taken and confirmed in the stamped session.
    confirmed: bool,
}

/// `SELECT` of this session's process id and token (empty when unset).
fn identity_sql() -> String {
    format!(
        "SELECT pg_backend_pid()::bigint, coalesce(current_setting('{TOKEN_SETTING}', true), '')"
    )
}

fn identity(row: &PgRow) -> Result<(i64, String), sqlx::Error> {
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// Stamps the session `conn` runs in; a token already there means another client used it
/// (`first`: our other connection's stamp, to say so when it was that one).
async fn stamp(
    conn: &mut PgConnection,
    who: &str,
    first: Option<&Stamp>,
) -> Result<Stamp, Suspect> {
    let token = format!("{:016x}", fastrand::u64(..));
    // Two statements in one message: one transaction, one server session. Reading before
    // writing in separate statements leaves no doubt about the order.
    let sql = format!(
        "{}; SELECT set_config('{TOKEN_SETTING}', {}, false)",
        identity_sql(),
        SqlDialect::Postgres.literal(&token)
    );
    let rows = conn.fetch_all(sql.as_str()).await?;
    let row = rows
        .first()
        .ok_or_else(|| sqlx::Error::Protocol("no row for the session check".into()))?;
    let (pid, previous) = identity(row)?;
    if first.is_some_and(|first| first.token == previous) {
        return Err(Suspect::Shared(format!(
            "{who}, opened while the lock connection was open, was served by the lock \
             connection's own server session (process {pid})"
        )));
    }
    if !previous.is_empty() {
        return Err(Suspect::Shared(format!(
            "the server session (process {pid}) behind {who}, new a moment ago, had already \
             been used by another dirthara connection"
        )));
    }
    Ok(Stamp { pid, token })
}

/// Reads the stamp back in a transaction of its own.
async fn recheck(conn: &mut PgConnection, stamp: &Stamp, who: &str) -> Result<(), Suspect> {
    let row = conn.fetch_one(identity_sql().as_str()).await?;
    let (pid, token) = identity(&row)?;
    if pid == stamp.pid && token != stamp.token {
        // Same server process, its session setting gone: the proxy reset the session between
        // transactions (Odyssey does, with DISCARD ALL or its "smart" discard). Such a reset
        // releases session-level advisory locks too.
        return Err(Suspect::Shared(format!(
            "the server session (process {pid}) behind {who} was reset between two consecutive \
             transactions (its session settings gone, as a proxy's DISCARD ALL does, which also \
             releases session locks)"
        )));
    }
    if pid != stamp.pid || token != stamp.token {
        return Err(Suspect::Shared(format!(
            "two consecutive transactions on {who} ran in different server sessions \
             (process {}, then {pid})",
            stamp.pid
        )));
    }
    Ok(())
}

impl SessionCheck {
    /// Stamps the lock connection `main` and a second connection opened with `options`, then
    /// reads both stamps back a few times, alternating.
    pub(super) async fn start(
        main: &mut PgConnection,
        options: &PgConnectOptions,
    ) -> Result<SessionCheck, Suspect> {
        // Only stamped and read back: it needs none of a migration session's setup. It is
        // opened while the lock connection stamps its session (a proxy gives a client a server
        // session only for its first transaction, so the sibling's stamp below still runs
        // after the lock connection's and finds its token where the proxy reuses a session).
        let (sibling, main_stamp) = tokio::join!(
            sqlx::ConnectOptions::connect(options),
            stamp(main, "the lock connection", None)
        );
        let mut sibling = sibling?;
        let checked = async {
            let main_stamp = main_stamp?;
            let sibling_stamp =
                stamp(&mut sibling, "a second connection", Some(&main_stamp)).await?;
            if sibling_stamp.pid == main_stamp.pid {
                return Err(Suspect::Shared(format!(
                    "two connections open at the same time were served by one server session \
                     (process {})",
                    main_stamp.pid
                )));
            }
            // Both connections read back at the same time: the same transactions as one
            // after the other, in half the wall time (and a proxy is, if anything, likelier
            // to shuffle sessions between clients that are busy at once).
            for _ in 0..ROUNDS {
                let (main_seen, sibling_seen) = tokio::join!(
                    recheck(main, &main_stamp, "the lock connection"),
                    recheck(&mut sibling, &sibling_stamp, "a second connection")
                );
                main_seen?;
                sibling_seen?;
            }
            Ok((main_stamp, sibling_stamp))
        }
        .await;
        match checked {
            Ok((main, sibling_stamp)) => Ok(SessionCheck {
                main,
                sibling: Some((sibling, sibling_stamp)),
                confirmed: false,
            }),
            Err(suspect) => {
                // Closed with the protocol's goodbye: the server logs no lost client.
                let _ = sibling.close().await;
                Err(suspect)
            }
        }
    }

    /// Closes the second connection, cleanly, if it is still open. `false` when the lock was
    /// not taken and confirmed: a check without its second connection is no longer whole, so
    /// another attempt must start it over.
    pub(super) async fn close_sibling(&mut self) -> bool {
        if let Some((sibling, _)) = self.sibling.take() {
            let _ = sibling.close().await;
        }
        self.confirmed
    }

    /// Tries the lock `key` (matched in `pg_locks` by `lock_match`) in the stamped session
    /// only, and only if that session does not hold it already; once taken, confirms it.
    pub(super) async fn try_lock(
        &mut self,
        main: &mut PgConnection,
        key: i64,
        lock_match: &str,
    ) -> Result<bool, Suspect> {
        let token = SqlDialect::Postgres.literal(&self.main.token);
        // The inner query (kept apart by OFFSET 0, so the planner cannot merge it into the
        // outer one) looks first; CASE then runs the lock function only in our session and
        // only when that session is not holding the lock already.
        let sql = format!(
            "SELECT s.pid, s.token, s.held, CASE WHEN s.held OR s.token <> {token} THEN false \
             ELSE pg_try_advisory_lock({key}) END \
             FROM ({} OFFSET 0) AS s(pid, token, held)",
            session_with_lock_sql(lock_match)
        );
        let row = main.fetch_one(sql.as_str()).await?;
        let (pid, found, held, taken): (i64, String, bool, bool) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        );
        if pid != self.main.pid || found != self.main.token {
            return Err(Suspect::Shared(format!(
                "the lock attempt ran in a different server session (process {pid}) than the \
                 one this connection was checked in (process {})",
                self.main.pid
            )));
        }
        if held {
            return Err(Suspect::Shared(format!(
                "the server session (process {pid}) already held the migration lock although \
                 this runner never took it: another client shares that session"
            )));
        }
        if !taken {
            return Ok(false);
        }
        if let Err(suspect) = self.confirm(main, lock_match).await {
            release_if_here(main, &self.main, key).await;
            return Err(suspect);
        }
        // Confirmed: the second connection has done its job, and is closed once the wait is
        // over ([`SessionCheck::close_sibling`]).
        self.confirmed = true;
        Ok(true)
    }

    /// After taking the lock: a separate transaction must find it in the same session, and the
    /// second connection's session must not hold it.
    async fn confirm(&mut self, main: &mut PgConnection, lock_match: &str) -> Result<(), Suspect> {
        let sql = session_with_lock_sql(lock_match);
        // Both reads at once; each is judged on its own below.
        let (row, sibling_row) = match self.sibling.as_mut() {
            Some((sibling, _)) => {
                let (row, other) = tokio::join!(
                    main.fetch_one(sql.as_str()),
                    sibling.fetch_one(sql.as_str())
                );
                (row, Some(other))
            }
            None => (main.fetch_one(sql.as_str()).await, None),
        };
        let row = row?;
        let (pid, token, held): (i64, String, bool) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        if pid != self.main.pid || token != self.main.token || !held {
            return Err(Suspect::Shared(format!(
                "the lock was taken in server session (process {}), but the next transaction ran \
                 in process {pid}{}",
                self.main.pid,
                if held { "" } else { ", which does not hold it" }
            )));
        }
        if let (Some((_, stamp)), Some(row)) = (self.sibling.as_ref(), sibling_row) {
            let row = row?;
            let (pid, token, held): (i64, String, bool) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            if held || pid != stamp.pid || token != stamp.token {
                return Err(Suspect::Shared(format!(
                    "a second connection, which never took the lock, ran in server session \
                     (process {pid}){}",
                    if held { ", which holds it" } else { "" }
                )));
            }
        }
        Ok(())
    }

    /// Puts the stamp back after `RESET ALL` (which clears it with every other setting)
    /// between migrations.
    pub(super) fn restamp_sql(&self) -> String {
        format!(
            "SELECT set_config('{TOKEN_SETTING}', {}, false)",
            SqlDialect::Postgres.literal(&self.main.token)
        )
    }

    /// The condition, for `holds_lock`, that a statement runs in the stamped session.
    pub(super) fn in_our_session_sql(&self) -> String {
        format!(
            "pg_backend_pid() = {} AND coalesce(current_setting('{TOKEN_SETTING}', true), '') = {}",
            self.main.pid,
            SqlDialect::Postgres.literal(&self.main.token)
        )
    }
}

/// `SELECT` of this session's process id, token, and whether it holds the lock `lock_match`.
fn session_with_lock_sql(lock_match: &str) -> String {
    format!(
        "SELECT pg_backend_pid()::bigint, \
         coalesce(current_setting('{TOKEN_SETTING}', true), ''), \
         EXISTS (SELECT 1 FROM pg_locks l WHERE {lock_match} AND l.pid = pg_backend_pid())"
    )
}

/// After a failed confirmation: releases the lock if this statement happens to run in the
/// session that took it. Elsewhere it does nothing, and the lock stays with that server
/// session until the proxy closes it (or `dirthara unlock --force` ends it).
async fn release_if_here(main: &mut PgConnection, stamp: &Stamp, key: i64) {
    let sql = format!(
        "SELECT CASE WHEN pg_backend_pid() = {} AND current_setting('{TOKEN_SETTING}', true) = {} \
         THEN pg_advisory_unlock({key}) ELSE false END",
        stamp.pid,
        SqlDialect::Postgres.literal(&stamp.token)
    );
    let _ = main.execute(sql.as_str()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use dirthara_test_kit::servers::{Server, TestDb};

    /// A proxy that resets the server session between transactions (Odyssey's discard) keeps
    /// the process but loses the stamp: that is reported as a reset, not as another session.
    #[tokio::test]
    async fn a_session_reset_between_transactions_is_reported_as_such() {
        let Some(db) = TestDb::create(Server::Postgres).await else {
            return;
        };
        let mut conn = PgConnection::connect(&db.url).await.unwrap();
        let Ok(mine) = stamp(&mut conn, "the lock connection", None).await else {
            panic!("a direct connection failed its own stamp");
        };
        assert!(recheck(&mut conn, &mine, "the lock connection")
            .await
            .is_ok());
        conn.execute("DISCARD ALL").await.unwrap();
        match recheck(&mut conn, &mine, "the lock connection").await {
            Err(Suspect::Shared(evidence)) => {
                let expected = format!(
                    "the server session (process {}) behind the lock connection was reset",
                    mine.pid
                );
                assert!(evidence.starts_with(&expected), "{evidence}");
            }
            Err(Suspect::Database(e)) => panic!("{e}"),
            Ok(()) => panic!("a reset session passed the check"),
        }
        conn.close().await.unwrap();
    }
}
