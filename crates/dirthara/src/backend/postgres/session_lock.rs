//! The advisory lock as the lock module sees it: try, confirm, release (with a `NOTIFY` that
//! wakes the waiters), who holds it, waiting for its release, and ending its holder.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{Executor, Row};

use super::pooler::SessionCheck;
use super::{PgDriver, RELEASE_CHANNEL};
use crate::backoff::jittered;
use crate::error::Result;
use crate::events::LockHolder;
use crate::lock::SessionLock;

#[async_trait]
impl SessionLock for PgDriver {
    async fn try_lock(&mut self) -> Result<bool> {
        let key = self.lock_key;
        if self.direct {
            // No proxy in between: this connection is its own server session.
            let sql = format!("SELECT pg_try_advisory_lock({key})");
            let row = self
                .conn
                .fetch_one(sql.as_str())
                .await
                .map_err(|e| self.lock_error(e))?;
            return row.try_get(0).map_err(|e| self.lock_error(e));
        }
        if self.session_check.is_none() {
            let check = SessionCheck::start(&mut self.conn, &self.options).await;
            self.session_check = Some(check.map_err(|s| self.suspect_error(s))?);
        }
        let lock_match = self.lock_match();
        let check = self.session_check.as_mut().expect("checked above");
        let taken = check.try_lock(&mut self.conn, key, &lock_match).await;
        taken.map_err(|s| self.suspect_error(s))
    }

    /// The step's own message takes the lock check ([`lock_guard`](super::lock_guard)), so a
    /// step commits only if this session holds the lock — through the commit.
    fn verifies_in_step(&self) -> bool {
        true
    }

    async fn holds_lock(&mut self) -> Result<bool> {
        // Held by the server session this connection ran in when it took the lock — not by
        // whichever session a proxy handed this transaction to.
        let same_session = match &self.session_check {
            Some(check) => format!(" AND {}", check.in_our_session_sql()),
            None => String::new(),
        };
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE {} AND l.pid = pg_backend_pid()){same_session}",
            self.lock_match()
        );
        let row = self
            .conn
            .fetch_one(sql.as_str())
            .await
            .map_err(|e| self.lock_error(e))?;
        row.try_get::<bool, _>(0).map_err(|e| self.lock_error(e))
    }

    async fn unlock(&mut self) -> Result<()> {
        let key = self.lock_key;
        // Release and wake the waiters in one message.
        let sql = format!("SELECT pg_advisory_unlock({key}); NOTIFY {RELEASE_CHANNEL}");
        self.conn
            .execute(sql.as_str())
            .await
            .map(|_| ())
            .map_err(|e| self.lock_error(e))
    }

    async fn holder(&mut self) -> Result<Option<LockHolder>> {
        let sql = format!(
            "SELECT a.pid::bigint, a.application_name::text, \
             coalesce(host(a.client_addr), 'local socket')::text, \
             to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE {} LIMIT 1",
            self.lock_match()
        );
        let row = self
            .conn
            .fetch_optional(sql.as_str())
            .await
            .map_err(|e| self.lock_error(e))?;
        Ok(row.map(|row| {
            let mut holder = LockHolder::default();
            holder.session_id = row.try_get(0).ok();
            holder.application = row.try_get::<String, _>(1).ok().filter(|a| !a.is_empty());
            holder.client_address = row.try_get(2).ok();
            holder.since = row.try_get(3).ok();
            holder
        }))
    }

    async fn wait_for_release(&mut self, max: Duration) -> Result<()> {
        if self.listener.is_none() && !self.listener_failed {
            match ReleaseListener::open(&self.options).await {
                Some(listener) => {
                    self.listener = Some(listener);
                    // Listening now: return so the caller tries once more, closing the
                    // window in which a release happened before we listened.
                    return Ok(());
                }
                // A pooler may refuse LISTEN; fall back to short polling.
                None => self.listener_failed = true,
            }
        }
        if let Some(listener) = self.listener.as_mut() {
            match tokio::time::timeout(max, listener.listener.recv()).await {
                // Woken, or waited the whole `max`: either way the caller tries again. Behind
                // a transaction pooler LISTEN "succeeds" but nothing ever arrives, so waiting
                // degrades to polling every `max`.
                Ok(Ok(_)) | Err(_) => return Ok(()),
                // A listener that fails (a pooler or proxy closing it) would fail again at
                // once, turning the wait into a busy loop: poll instead.
                Ok(Err(_)) => {
                    if let Some(listener) = self.listener.take() {
                        listener.close().await;
                    }
                    self.listener_failed = true;
                }
            }
        }
        tokio::time::sleep(jittered(max.min(Duration::from_millis(100)))).await;
        Ok(())
    }

    async fn stop_waiting(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.close().await;
        }
        // The pooler check's second connection, closed cleanly now that the lock is reported
        // taken (or given up). Not taken: a later attempt on this connection starts over.
        if let Some(check) = self.session_check.as_mut() {
            if !check.close_sibling().await {
                self.session_check = None;
            }
        }
    }

    async fn force_unlock(&mut self) -> Result<Vec<String>> {
        // The holder's lock session, plus every other session announcing the same runner
        // (`dirthara <op> host:pid`): its migrations may run on connections of their own.
        let sql = format!(
            "WITH holder AS (SELECT a.pid, a.application_name FROM pg_locks l \
             JOIN pg_stat_activity a ON a.pid = l.pid WHERE {}) \
             SELECT a.pid::bigint, a.application_name::text, \
             coalesce(host(a.client_addr), 'local socket')::text, pg_terminate_backend(a.pid) \
             FROM pg_stat_activity a WHERE a.pid <> pg_backend_pid() AND (a.pid IN (SELECT pid FROM holder) \
             OR (a.application_name LIKE 'dirthara %' \
                 AND a.application_name IN (SELECT application_name FROM holder)))",
            self.lock_match()
        );
        let rows = self
            .conn
            .fetch_all(sql.as_str())
            .await
            .map_err(|e| self.lock_error(e))?;
        Ok(rows
            .iter()
            .map(|row| {
                let pid: i64 = row.try_get(0).unwrap_or_default();
                let app: String = row.try_get(1).unwrap_or_default();
                let addr: String = row.try_get(2).unwrap_or_default();
                format!("terminated session {pid} (`{app}`) from {addr}")
            })
            .collect())
    }
}

/// The connection a waiting runner listens on for the holder's release: opened with the
/// session's own options (so it names itself `dirthara <operation> <host>:<pid>` like every
/// dirthara session), and closed cleanly — `UNLISTEN`, then the protocol's goodbye — so the
/// server logs no lost client.
pub(super) struct ReleaseListener {
    listener: PgListener,
    /// The listener's one connection lives in a pool of one: closing the pool is how that
    /// connection is closed cleanly once the listener gives it back.
    pool: PgPool,
}

impl ReleaseListener {
    /// Listening on the release channel, or `None` when the server (or a pooler) refuses.
    async fn open(options: &PgConnectOptions) -> Option<ReleaseListener> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .ok()?;
        let listening = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(RELEASE_CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        match listening.await {
            Ok(listener) => Some(ReleaseListener { listener, pool }),
            Err(_) => {
                pool.close().await;
                None
            }
        }
    }

    pub(super) async fn close(self) {
        // The listener gives its connection back to the pool (after `UNLISTEN *`) on a task
        // of its own; closing the pool waits for it, then ends the connection cleanly.
        drop(self.listener);
        self.pool.close().await;
    }
}
