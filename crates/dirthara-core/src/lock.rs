//! The migration lock, whole: which strategy a command uses, taking it (one wait loop for both
//! strategies), holding it (the lease's heartbeat), confirming it before each migration (or
//! inside the migration's own transaction, where the database can), releasing it, and
//! inspecting or breaking it for `status` and `unlock`.
//!
//! The engine takes the lock before it reads any migration state and releases it when the
//! command ends, whatever the outcome. A held lock is a [`HeldLock`] value, the one place that
//! knows whether and how the lock is held; dropping it without [`HeldLock::release`] still
//! lets the lock go (a session lock ends with its connection, a lease's heartbeat stops and
//! the lease lapses), so no path keeps it.
//!
//! Databases supply what the lock needs through a [`LockHost`] (the history connection): a
//! [`SessionLock`] (a named lock in that connection's session) and a [`LeaseStore`] (a row or
//! document with an expiry), and what they offer ([`LockSupport`]). A runner waits in the
//! primitive's own way: on PostgreSQL outside any statement (woken at once by the release
//! notification), so a waiter never holds a snapshot that a holder's `CREATE INDEX
//! CONCURRENTLY` would wait for; on MySQL/MariaDB inside a short `GET_LOCK` (which holds no
//! snapshot), so the server hands the lock over at release; a lease with jittered backoff.
//!
//! May import: `backoff`, `config`, `error`, `events`, `report` — never a backend.

use std::time::Duration;

use async_trait::async_trait;

mod guard;
mod inspect;
pub mod lease;
mod session;
pub mod strategy;
pub mod wait;

pub use crate::kind::{LockSupport, SessionLockSupport};
use guard::SessionChecks;
pub use guard::{Carrier, HeldLock, LockCheck, ReleaseFailure, Released};
pub use inspect::{force_unlock, inspect};
pub use lease::{LeaseObservation, LeaseRecord, LeaseRequest, LeaseStore};
pub use session::SessionLock;
pub use strategy::resolve_strategy;
pub use wait::Waiting;

use crate::vocabulary::LockStrategy;

use crate::error::{Error, ErrorKind, Result};
use crate::events::{EventKind, LockHolder};

/// The lock's name, the same for every runner of every application.
pub const LOCK_NAME: &str = "dirthara:migrations";

/// Longest pause between two attempts at a session lock, in case a release notification is
/// missed (or the holder died and the server released its lock without notifying anyone).
const MAX_SESSION_PAUSE: Duration = Duration::from_millis(500);
// A wait without end is these pauses in a loop, each one `GET_LOCK` on MySQL, whose timeout
// TiDB caps at 3600 s: a slice longer than that would end a "wait forever" there.
const _: () = assert!(MAX_SESSION_PAUSE.as_secs() < 3600);

/// The wait when `lock_wait` is not set: a session lock waits for its holder; a lease fails
/// at once (the deploy orchestrator decides whether to retry).
pub fn default_wait(strategy: LockStrategy) -> crate::config::LockWait {
    match strategy {
        LockStrategy::Lease => crate::config::LockWait::For(Duration::ZERO),
        _ => crate::config::LockWait::Forever,
    }
}

/// The table (or collection) holding the lease: `<history>_lock`.
pub fn lease_table(history_table: &str) -> String {
    format!("{history_table}_lock")
}

/// The connection the lock lives on (the history connection), as the lock sees it.
///
/// Contract: [`LockHost::lock_support`] describes what this very connection offers, as
/// learnt when it opened (a server that fakes session locks says so); `session_lock` is
/// `Some` exactly when that support has a usable session lock; `lease_store` opens the lease
/// on a connection of its own, so that its heartbeat renews while a step runs on this one.
#[async_trait]
pub trait LockHost: Send {
    /// What this connection offers for locking.
    fn lock_support(&self) -> LockSupport;

    /// The connection's session lock, if it has one.
    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        None
    }

    /// The lease store in `<history>_lock`. With `create` false nothing is created: `None`
    /// when there is no lease table (so no lease) yet.
    async fn lease_store(&mut self, create: bool) -> Result<Option<Box<dyn LeaseStore>>>;
}

/// Takes the lock of `strategy` on `host`, waiting as `waiting` allows. On failure nothing is
/// held and a lease store is closed.
pub async fn acquire(
    host: &mut dyn LockHost,
    strategy: LockStrategy,
    waiting: &Waiting<'_>,
) -> Result<HeldLock> {
    let connection = waiting.connection;
    match strategy {
        LockStrategy::Off => {
            waiting.events.emit(EventKind::Unlocked {
                connection: connection.to_string(),
            });
            Ok(HeldLock::off(connection))
        }
        LockStrategy::Session => {
            let Some(lock) = host.session_lock() else {
                return Err(no_session_lock(connection));
            };
            let checks = SessionChecks {
                in_step: lock.verifies_in_step(),
                in_marker: lock.verifies_in_marker(),
            };
            let contended = wait::contend(&mut SessionContender(&mut *lock), waiting).await;
            // Taken or given up: whatever waiting needed (a connection listening for the
            // release) is closed now, not kept open for the rest of the command.
            lock.stop_waiting().await;
            contended?;
            Ok(HeldLock::session(connection, checks))
        }
        LockStrategy::Lease => {
            let mut store = open_lease(host).await?;
            let request = LeaseRequest::new(waiting.operation, waiting.lease_ttl);
            let mut contender = lease::LeaseContender::new(store.as_mut(), &request);
            match wait::contend(&mut contender, waiting).await {
                Ok(()) => Ok(HeldLock::lease(connection, store, &request)),
                Err(error) => {
                    store.close().await;
                    Err(error)
                }
            }
        }
    }
}

/// The lease store, created if need be (a run takes the lease).
async fn open_lease(host: &mut dyn LockHost) -> Result<Box<dyn LeaseStore>> {
    let database = host.lock_support().database;
    host.lease_store(true)
        .await?
        .ok_or_else(|| Error::config(format!("{database} does not support `locking = \"lease\"`")))
}

fn no_session_lock(connection: &str) -> Error {
    Error::new(ErrorKind::LockFailed {
        lock: LOCK_NAME.to_string(),
        connection: connection.to_string(),
        reason: "this connection offers no session lock".to_string(),
    })
}

/// Waiting for a session lock: retry the non-blocking attempt, pausing as the database
/// pauses best in between.
struct SessionContender<'a>(&'a mut dyn SessionLock);

#[async_trait]
impl wait::Contender for SessionContender<'_> {
    async fn try_take(&mut self) -> Result<bool> {
        // Planted fault (tests only): the lock reported taken without being taken.
        fail_point!("session_lock_not_taken", |_| Ok(true));
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
