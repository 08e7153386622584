//! A held lock, as a value: confirmed before each migration and released exactly once.

use super::lease::LeaseGuard;
use super::{SessionLock, Strategy, LOCK_NAME};
use crate::error::{Code, Error, ErrorKind, Result};
use crate::events::Warning;

/// The lock a command holds. The session lock lives in the history connection's session,
/// so confirming and releasing it go through that connection's [`SessionLock`].
pub(crate) enum HeldLock {
    /// `locking = false`: nothing is held.
    Off,
    /// Held by the history connection's session until it is unlocked or the session ends.
    Session,
    /// A lease, renewed by its heartbeat until released.
    Lease(LeaseGuard),
}

/// How a release ended when it did not fail.
#[derive(Debug)]
pub(crate) enum Released {
    Cleanly,
    /// The lease was no longer ours (it lapsed, or was force-released): left untouched.
    NoLongerOurs(Warning),
}

/// A release that did not happen.
#[derive(Debug)]
pub(crate) struct ReleaseFailure {
    pub(super) reason: String,
    /// A lease lapses by itself when its time runs out; a session lock goes with the session,
    /// which the engine closes next, but a failed unlock means something is wrong with it.
    pub lapses_by_itself: bool,
}

impl ReleaseFailure {
    pub(crate) fn into_error(self, connection: &str) -> Error {
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: connection.to_string(),
            reason: self.reason,
        })
    }

    /// When the command itself succeeded, a lease that lapses by itself is only worth a warning.
    pub(crate) fn into_warning(self) -> Warning {
        Warning {
            code: Code::MigrationLockFailed,
            message: self.reason,
        }
    }
}

impl HeldLock {
    pub(crate) fn strategy(&self) -> Strategy {
        match self {
            HeldLock::Off => Strategy::Off,
            HeldLock::Session => Strategy::Session,
            HeldLock::Lease(_) => Strategy::Lease,
        }
    }

    /// Whether the lock is still ours; `Err` when that cannot be told. `session` is the
    /// history connection's session lock.
    pub(crate) async fn confirm(&self, session: Option<&mut dyn SessionLock>) -> Result<bool> {
        match self {
            HeldLock::Off => Ok(true),
            HeldLock::Session => match session {
                Some(lock) => lock.holds_lock().await,
                None => Ok(false),
            },
            HeldLock::Lease(lease) => lease.confirm().await,
        }
    }

    /// Lets the lock go. `session` is the history connection's session lock.
    pub(crate) async fn release(
        self,
        session: Option<&mut dyn SessionLock>,
    ) -> std::result::Result<Released, ReleaseFailure> {
        match self {
            HeldLock::Off => Ok(Released::Cleanly),
            HeldLock::Session => {
                let unlocked = match session {
                    Some(lock) => lock.unlock().await,
                    None => Ok(()),
                };
                unlocked
                    .map(|()| Released::Cleanly)
                    .map_err(|error| ReleaseFailure {
                        reason: format!(
                            "releasing the lock failed ({error}); the database releases it when \
                             this session ends, which happens now"
                        ),
                        lapses_by_itself: false,
                    })
            }
            HeldLock::Lease(lease) => lease.release().await,
        }
    }
}
