//! The migration lock: which strategy a command uses, and how a runner waits for it.
//!
//! The engine takes the lock before it reads any migration state and releases it when the
//! command ends, whatever the outcome. A runner retries a non-blocking try-lock and waits in
//! between in the backend's own way: on PostgreSQL outside any statement (woken at once by
//! the release notification), so a waiter never holds a snapshot that a holder's
//! `CREATE INDEX CONCURRENTLY` would wait for; on MySQL/MariaDB inside a short `GET_LOCK`
//! (which holds no snapshot), so the server hands the lock over at release. Either way a
//! wait is at most `MAX_RETRY_INTERVAL` long, and a shutdown signal cuts it short.

use std::time::{Duration, Instant};

use tokio::sync::watch;

pub mod lease;

use crate::backend::{BackendKind, SessionLock};
use crate::config::{LockWait, Locking};
use crate::error::{Error, ErrorKind, Result};
use crate::events::{Event, EventSink};

/// The lock's name, the same for every runner of every application.
pub const LOCK_NAME: &str = "dirthara:migrations";

/// How often a waiting runner says again who holds the lock.
const HOLDER_REPORT_INTERVAL: Duration = Duration::from_secs(10);

/// Longest sleep between two attempts, in case a release notification is missed (or the
/// holder died and the server released its lock without notifying anyone).
const MAX_RETRY_INTERVAL: Duration = Duration::from_millis(500);

/// The lock a command actually takes, once `locking` met the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// No lock, by configuration.
    Off,
    /// A named lock held by the history connection's session.
    Session,
    /// A lease row/document with an expiry, renewed while the command runs.
    Lease,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Off => "off",
            Strategy::Session => "session",
            Strategy::Lease => "lease",
        }
    }

    /// The wait when `lock_wait` is not set: a session lock waits for its holder; a lease
    /// fails at once (the deploy orchestrator decides whether to retry).
    pub fn default_wait(self) -> LockWait {
        match self {
            Strategy::Lease => LockWait::For(Duration::ZERO),
            _ => LockWait::Forever,
        }
    }
}

/// The table (or collection) holding the lease: `<history>_lock`.
pub fn lease_table(history_table: &str) -> String {
    format!("{history_table}_lock")
}

/// Decides the strategy before any connection is opened, so that a run that cannot be
/// locked is refused before it reads or changes anything (SQLite with `locking = true`).
pub(crate) fn resolve_strategy(
    locking: Locking,
    kind: BackendKind,
    connection: &str,
) -> Result<Strategy> {
    let failed = |reason: String| {
        Err(Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: connection.to_string(),
            reason,
        }))
    };
    match locking {
        Locking::Off => Ok(Strategy::Off),
        // MongoDB has no session lock: its native lock is the lease.
        Locking::Auto if kind == BackendKind::Mongo => Ok(Strategy::Lease),
        Locking::Auto | Locking::Session if kind.has_session_lock() => Ok(Strategy::Session),
        Locking::Auto | Locking::Session => failed(format!(
            "{} has no named session locks, so this run cannot be locked; nothing was read or \
             changed. If several processes may migrate this database, use --locking lease \
             (`locking = \"lease\"`); if a single runner is guaranteed (development, tests), \
             run with --no-lock (`locking = false`)",
            kind.name()
        )),
        Locking::Lease => Ok(Strategy::Lease),
    }
}

/// `INTERRUPTED` by a signal that came while waiting for the lock: nothing had started.
pub(crate) fn interrupted_while_waiting(waited: Duration) -> Error {
    Error::new(ErrorKind::Interrupted {
        remaining: Vec::new(),
    })
    .after_waiting(waited)
}

/// `held` after the wait ran out: says how long we waited when a wait was asked for, so
/// the advice is not to wait again (a zero wait is no wait; its advice is to wait).
pub(crate) fn after_wait(held: Error, wait: LockWait, waited: Duration) -> Error {
    match wait {
        LockWait::For(limit) if limit.is_zero() => held,
        _ => held.after_waiting(waited),
    }
}

/// What a waiting runner needs to report.
pub(crate) struct LockTarget<'a> {
    pub connection: &'a str,
    pub table: &'a str,
    pub wait: LockWait,
}

/// Takes a session lock, retrying until it is free or the wait runs out.
///
/// A wait ends by the deadline (a blocking attempt is given no more than the time left), so
/// once this returns `MIGRATION_LOCK_HELD` no attempt is left in flight. An attempt abandoned
/// by a shutdown signal is the backend's to cancel when the connection is closed.
pub(crate) async fn acquire_session_lock(
    lock: &mut dyn SessionLock,
    target: &LockTarget<'_>,
    events: &EventSink,
    shutdown: Option<&watch::Receiver<bool>>,
) -> Result<()> {
    let started = Instant::now();
    let deadline = match target.wait {
        LockWait::Forever => None,
        LockWait::For(limit) => Some(started + limit),
    };
    let mut next_report = started;
    loop {
        if lock.try_lock(target.table).await? {
            events.emit(Event::LockAcquired {
                lock: LOCK_NAME.to_string(),
                connection: target.connection.to_string(),
                waited: started.elapsed(),
            });
            return Ok(());
        }
        if shutdown.is_some_and(|rx| *rx.borrow()) {
            return Err(interrupted_while_waiting(started.elapsed()));
        }
        let now = Instant::now();
        let remaining = deadline.map(|d| d.saturating_duration_since(now));
        if remaining == Some(Duration::ZERO) {
            let holder = lock.holder(target.table).await.ok().flatten();
            let held = Error::new(ErrorKind::LockHeld {
                lock: LOCK_NAME.to_string(),
                connection: target.connection.to_string(),
                holder: holder.map(|h| h.to_string()),
            });
            return Err(after_wait(held, target.wait, started.elapsed()));
        }
        if now >= next_report {
            let holder = lock.holder(target.table).await.ok().flatten();
            events.emit(Event::LockWaiting {
                lock: LOCK_NAME.to_string(),
                connection: target.connection.to_string(),
                holder,
                waited: now - started,
            });
            next_report = now + HOLDER_REPORT_INTERVAL;
        }
        let nap = remaining.map_or(MAX_RETRY_INTERVAL, |r| r.min(MAX_RETRY_INTERVAL));
        match shutdown {
            Some(rx) => {
                // A clone has seen what `rx` has seen, so a signal sent since it was last
                // read wakes this at once.
                let mut signal = rx.clone();
                tokio::select! {
                    waited = lock.wait_for_release(target.table, nap) => waited?,
                    _ = signal.wait_for(|stop| *stop) => {
                        return Err(interrupted_while_waiting(started.elapsed()));
                    }
                }
            }
            None => lock.wait_for_release(target.table, nap).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_refuses_native_locking_but_runs_unlocked_on_request() {
        let err = resolve_strategy(Locking::Auto, BackendKind::Sqlite, "default").unwrap_err();
        assert_eq!(err.code(), crate::Code::MigrationLockFailed);
        assert_eq!(err.lock_context(), Some((LOCK_NAME, "default")));
        assert!(err.to_string().contains("--no-lock"));
        assert_eq!(
            resolve_strategy(Locking::Off, BackendKind::Sqlite, "default").unwrap(),
            Strategy::Off
        );
        assert_eq!(
            resolve_strategy(Locking::Auto, BackendKind::Postgres, "default").unwrap(),
            Strategy::Session
        );
    }
}
