//! The migration lock, whole: which strategy a command uses, taking it (one wait loop for both
//! strategies), holding it (the lease's heartbeat), confirming it before each migration,
//! releasing it, and inspecting it for `status` and `unlock`.
//!
//! The engine takes the lock before it reads any migration state and releases it when the
//! command ends, whatever the outcome. A held lock is a [`HeldLock`] value; dropping it without
//! [`HeldLock::release`] still lets the lock go (a session lock ends with its connection, a
//! lease's heartbeat stops and the lease lapses), so no path keeps it.
//!
//! Databases supply two small primitives and never see the rest: a [`SessionLock`] (a named
//! lock in the history connection's session) and a [`LeaseStore`] (a row or document with an
//! expiry). A runner waits in the primitive's own way: on PostgreSQL outside any statement
//! (woken at once by the release notification), so a waiter never holds a snapshot that a
//! holder's `CREATE INDEX CONCURRENTLY` would wait for; on MySQL/MariaDB inside a short
//! `GET_LOCK` (which holds no snapshot), so the server hands the lock over at release; a
//! lease with jittered backoff.
//!
//! May import: `config`, `error`, `events` — never a backend.

use std::time::Duration;

use async_trait::async_trait;

mod guard;
pub(crate) mod lease;
mod session;
mod wait;

pub(crate) use guard::{HeldLock, ReleaseFailure, Released};
pub(crate) use lease::{LeaseObservation, LeaseRecord, LeaseRequest, LeaseStore};
pub(crate) use session::{jittered, SessionLock};
pub(crate) use wait::Waiting;

use crate::config::{LockWait, Locking};
use crate::error::{Error, ErrorKind, Result};
use crate::events::{Event, LockHolder};
use crate::report::LockState;

/// The lock's name, the same for every runner of every application.
pub const LOCK_NAME: &str = "dirthara:migrations";

/// Longest pause between two attempts at a session lock, in case a release notification is
/// missed (or the holder died and the server released its lock without notifying anyone).
const MAX_SESSION_PAUSE: Duration = Duration::from_millis(500);

/// The lock a command actually takes, once `locking` met the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// No lock, by configuration.
    Off,
    /// A named lock held by the history connection's session.
    Session,
    /// A lease row/document with an expiry, renewed while the command runs.
    Lease,
}

impl Strategy {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Strategy::Off => "off",
            Strategy::Session => "session",
            Strategy::Lease => "lease",
        }
    }

    /// The wait when `lock_wait` is not set: a session lock waits for its holder; a lease
    /// fails at once (the deploy orchestrator decides whether to retry).
    pub(crate) fn default_wait(self) -> LockWait {
        match self {
            Strategy::Lease => LockWait::For(Duration::ZERO),
            _ => LockWait::Forever,
        }
    }
}

/// What a database offers for locking, known before connecting to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockSupport {
    /// The database's name in messages (`sqlite`, `postgres`, ...).
    pub database: &'static str,
    /// It has a named session lock.
    pub session_lock: bool,
    /// Its own lock is the lease (`locking = true` means a lease there).
    pub lease_is_native: bool,
}

/// `locking = true` (or `session`) on a database without a session lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoSessionLock {
    database: &'static str,
}

impl NoSessionLock {
    /// Why `status` and `unlock` have no lock to show.
    pub(crate) fn nothing_to_inspect(self) -> String {
        format!(
            "{} has no lock to inspect; runs need --no-lock (`locking = false`) or --locking lease",
            self.database
        )
    }

    /// The refusal of a run, before anything is read or changed.
    pub(crate) fn into_error(self, connection: &str) -> Error {
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: connection.to_string(),
            reason: format!(
                "{} has no named session locks, so this run cannot be locked; nothing was read or \
                 changed. If several processes may migrate this database, use --locking lease \
                 (`locking = \"lease\"`); if a single runner is guaranteed (development, tests), \
                 run with --no-lock (`locking = false`)",
                self.database
            ),
        })
    }
}

/// Decides the strategy before any connection is opened, so that a run that cannot be
/// locked is refused before it reads or changes anything (SQLite with `locking = true`).
pub(crate) fn resolve_strategy(
    locking: Locking,
    support: LockSupport,
) -> std::result::Result<Strategy, NoSessionLock> {
    match locking {
        Locking::Off => Ok(Strategy::Off),
        Locking::Auto if support.lease_is_native => Ok(Strategy::Lease),
        Locking::Auto | Locking::Session if support.session_lock => Ok(Strategy::Session),
        Locking::Auto | Locking::Session => Err(NoSessionLock {
            database: support.database,
        }),
        Locking::Lease => Ok(Strategy::Lease),
    }
}

/// The table (or collection) holding the lease: `<history>_lock`.
pub(crate) fn lease_table(history_table: &str) -> String {
    format!("{history_table}_lock")
}

/// What the chosen strategy contends with: nothing, the history connection's session lock,
/// or a lease store on a connection of its own.
pub(crate) enum Primitive<'a> {
    Off,
    Session(&'a mut dyn SessionLock),
    Lease(Box<dyn LeaseStore>),
}

/// Takes the lock, waiting as `waiting` allows. On failure nothing is held and a lease
/// store is closed.
pub(crate) async fn acquire(primitive: Primitive<'_>, waiting: &Waiting<'_>) -> Result<HeldLock> {
    match primitive {
        Primitive::Off => {
            waiting.events.emit(Event::Unlocked {
                connection: waiting.connection.to_string(),
            });
            Ok(HeldLock::Off)
        }
        Primitive::Session(lock) => {
            wait::contend(&mut SessionContender(lock), waiting).await?;
            Ok(HeldLock::Session)
        }
        Primitive::Lease(mut store) => {
            let request = LeaseRequest::new(waiting.operation, waiting.lease_ttl);
            let mut contender = lease::LeaseContender::new(store.as_mut(), &request);
            match wait::contend(&mut contender, waiting).await {
                Ok(()) => Ok(HeldLock::Lease(lease::LeaseGuard::start(store, &request))),
                Err(error) => {
                    store.close().await;
                    Err(error)
                }
            }
        }
    }
}

/// The lock's state as `status` and `unlock` show it, read through the strategy's primitive.
pub(crate) async fn inspect(primitive: Primitive<'_>) -> Result<LockState> {
    match primitive {
        Primitive::Off => Ok(LockState::Off),
        Primitive::Session(lock) => Ok(match lock.holder().await? {
            Some(holder) => LockState::Held {
                holder,
                malformed: false,
            },
            None => LockState::Free,
        }),
        Primitive::Lease(mut store) => {
            let observed = store.observe().await;
            store.close().await;
            Ok(lease::state_of(observed?))
        }
    }
}

/// Waiting for a session lock: retry the non-blocking attempt, pausing as the database
/// pauses best in between.
struct SessionContender<'a>(&'a mut dyn SessionLock);

#[async_trait]
impl wait::Contender for SessionContender<'_> {
    async fn try_take(&mut self) -> Result<bool> {
        self.0.try_lock().await
    }

    async fn holder(&mut self) -> Result<Option<LockHolder>> {
        self.0.holder().await
    }

    async fn pause(&mut self, remaining: Option<Duration>) -> Result<()> {
        let pause = remaining.map_or(MAX_SESSION_PAUSE, |r| r.min(MAX_SESSION_PAUSE));
        self.0.wait_for_release(pause).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQLITE: LockSupport = LockSupport {
        database: "sqlite",
        session_lock: false,
        lease_is_native: false,
    };

    #[test]
    fn sqlite_refuses_native_locking_but_runs_unlocked_on_request() {
        let refused = resolve_strategy(Locking::Auto, SQLITE).unwrap_err();
        let err = refused.into_error("default");
        assert_eq!(err.code(), crate::Code::MigrationLockFailed);
        assert_eq!(err.lock_context(), Some((LOCK_NAME, "default")));
        assert!(err.to_string().contains("--no-lock"));
        assert_eq!(
            resolve_strategy(Locking::Off, SQLITE).unwrap(),
            Strategy::Off
        );
        let postgres = LockSupport {
            database: "postgres",
            session_lock: true,
            lease_is_native: false,
        };
        assert_eq!(
            resolve_strategy(Locking::Auto, postgres).unwrap(),
            Strategy::Session
        );
    }
}
