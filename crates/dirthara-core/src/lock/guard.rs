//! A held lock, as a value: the one place that knows whether and how the lock is held. It is
//! confirmed before each migration (or inside the migration's own transaction, where the
//! database can do that) and released exactly once.

use super::lease::{LeaseGuard, LeaseRequest, LeaseStore};
use super::{LockHost, LockStrategy, LOCK_NAME};
use crate::error::{Code, Error, ErrorKind, Result};
use crate::events::Warning;

/// The lock a command holds, on the connection named `connection` (the history connection).
pub struct HeldLock {
    held: Held,
    connection: String,
}

enum Held {
    /// `locking = false`: nothing is held.
    Off,
    /// Held by the history connection's session until it is unlocked or the session ends.
    /// The lock is that session's, so confirming and releasing borrow it from the host.
    Session(SessionChecks),
    /// A lease, renewed by its heartbeat until released; it owns its store.
    Lease(LeaseGuard),
}

/// Where a session lock can be confirmed without a round trip of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionChecks {
    /// The database checks the lock inside a step's own transaction, failing the step
    /// (rolled back) when the session no longer holds it.
    pub in_step: bool,
    /// The database checks the lock in the message that writes a step's `running` marker,
    /// writing the marker only while the session holds it.
    pub in_marker: bool,
}

/// How the lock is confirmed before a step changes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockCheck {
    /// A separate check first: the step does not run unless the lock is still ours.
    Before,
    /// Inside the step's own transaction: the step commits only if the lock is still ours,
    /// so a separate check would only cost a round trip.
    InStep,
    /// With the step's `running` marker: the marker is written, and the step run, only if
    /// the lock is still ours.
    InMarker,
}

/// What could carry a step's lock check, as far as the step itself goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// Text sent with its history record in one transaction of the history connection.
    AtomicText,
    /// A step bracketed by a `running` marker written on the history connection first.
    Marker,
    /// Neither (a record alone; a Rust migration run atomically).
    Nothing,
}

/// How a release ended when it did not fail.
#[derive(Debug)]
pub enum Released {
    Cleanly,
    /// Nothing was held (`locking = false`).
    NothingHeld,
    /// The lease was no longer ours (it lapsed, or was force-released): left untouched.
    NoLongerOurs(Warning),
}

/// A release that did not happen.
#[derive(Debug)]
pub struct ReleaseFailure {
    pub(super) reason: String,
    /// What the database said, kept as the error's `source()`.
    pub(super) cause: Error,
    /// A lease lapses by itself when its time runs out; a session lock goes with the session,
    /// which the engine closes next, but a failed unlock means something is wrong with it.
    pub lapses_by_itself: bool,
}

impl ReleaseFailure {
    pub fn into_error(self, connection: &str) -> Error {
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: connection.to_string(),
            reason: self.reason,
        })
        .caused_by(self.cause)
    }

    /// When the command itself succeeded, a lease that lapses by itself is only worth a warning.
    pub fn into_warning(self) -> Warning {
        Warning {
            code: Code::MigrationLockFailed,
            message: self.reason,
        }
    }
}

impl HeldLock {
    pub fn off(connection: &str) -> Self {
        HeldLock {
            held: Held::Off,
            connection: connection.to_string(),
        }
    }

    pub fn session(connection: &str, checks: SessionChecks) -> Self {
        HeldLock {
            held: Held::Session(checks),
            connection: connection.to_string(),
        }
    }

    pub fn lease(connection: &str, store: Box<dyn LeaseStore>, request: &LeaseRequest) -> Self {
        HeldLock {
            held: Held::Lease(LeaseGuard::start(store, request)),
            connection: connection.to_string(),
        }
    }

    pub fn strategy(&self) -> LockStrategy {
        match self.held {
            Held::Off => LockStrategy::Off,
            Held::Session(_) => LockStrategy::Session,
            Held::Lease(_) => LockStrategy::Lease,
        }
    }

    /// How the lock is confirmed before a step, given what of the step could carry it.
    pub fn check_for(&self, carrier: Carrier) -> LockCheck {
        match (&self.held, carrier) {
            (Held::Session(checks), Carrier::AtomicText) if checks.in_step => LockCheck::InStep,
            (Held::Session(checks), Carrier::Marker) if checks.in_marker => LockCheck::InMarker,
            _ => LockCheck::Before,
        }
    }

    /// Confirms the lock is still ours before changing anything more: `LOCK_LEASE_LOST`
    /// naming `next` (the migration that was not started) when it is not, or when that
    /// cannot be told (a query error means the session is in trouble).
    pub async fn ensure(&self, host: &mut dyn LockHost, next: Option<(i64, &str)>) -> Result<()> {
        match self.confirm(host).await {
            Ok(true) => Ok(()),
            Ok(false) | Err(_) => Err(self.lost(next)),
        }
    }

    /// Whether the lock is still ours; `Err` when that cannot be told.
    async fn confirm(&self, host: &mut dyn LockHost) -> Result<bool> {
        // Planted fault (tests only): the lock confirmed without asking.
        fail_point!("lock_confirmed_blindly", |_| Ok(true));
        match &self.held {
            Held::Off => Ok(true),
            Held::Session(_) => match host.session_lock() {
                Some(lock) => lock.holds_lock().await,
                None => Err(super::no_session_lock(&self.connection)),
            },
            Held::Lease(lease) => lease.confirm().await,
        }
    }

    /// `LOCK_LEASE_LOST`: the lock is gone, before `next` (the migration not started).
    pub fn lost(&self, next: Option<(i64, &str)>) -> Error {
        Error::new(ErrorKind::LockLost {
            lock: LOCK_NAME.to_string(),
            connection: self.connection.clone(),
            next: next.map(|(version, name)| (version, name.to_string())),
        })
    }

    /// A step that carried the lock check ([`LockCheck::InStep`]) failed: either the step
    /// itself failed, or the check did because the lock is gone. Only a lock known to be gone
    /// is reported as lost; otherwise the step's own error stands, with a failed check
    /// attached under it.
    pub async fn explain_in_step_failure(
        &self,
        host: &mut dyn LockHost,
        error: Error,
        step: (i64, &str),
    ) -> Error {
        match error.kind() {
            ErrorKind::MigrationFailed { error: db, .. } if !db.connection_lost => {}
            // A dead session can be asked nothing more; other errors are not the step's.
            _ => return error,
        }
        match self.confirm(host).await {
            Ok(true) => error,
            Ok(false) => self.lost(Some(step)),
            Err(check) => error.with_secondary(check),
        }
    }

    /// Lets the lock go.
    pub async fn release(
        self,
        host: &mut dyn LockHost,
    ) -> std::result::Result<Released, ReleaseFailure> {
        match self.held {
            Held::Off => Ok(Released::NothingHeld),
            Held::Session(_) => {
                let unlocked = match host.session_lock() {
                    Some(lock) => lock.unlock().await,
                    None => Err(super::no_session_lock(&self.connection)),
                };
                unlocked
                    .map(|()| Released::Cleanly)
                    .map_err(|error| ReleaseFailure {
                        reason: format!(
                            "releasing the lock failed ({error}); the database releases it when \
                             this session ends, which happens now"
                        ),
                        cause: error,
                        lapses_by_itself: false,
                    })
            }
            Held::Lease(lease) => lease.release().await,
        }
    }
}
