//! Which lock a command takes, once `locking` meets what the database offers.
//!
//! Decided twice, from the same rules: before connecting, from what the URL's kind of database
//! promises (so that SQLite with `locking = true` is refused before its file is even created),
//! and again once connected, from what the server turned out to be (a `postgres://` URL may
//! reach CockroachDB, whose advisory locks are no-ops).

use super::{LockStrategy, LOCK_NAME};
use crate::config::Locking;
use crate::error::{Error, ErrorKind};
use crate::kind::{LockSupport, SessionLockSupport};

/// The strategy a command uses, and why, when that is worth saying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub strategy: LockStrategy,
    /// Set when `locking = true` chose the lease because the session lock cannot be trusted.
    pub because: Option<String>,
}

/// A `locking` value the database cannot honour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `locking = true` (or `session`) on a database without a session lock.
    NoSessionLock { database: &'static str },
    /// `locking = "session"` on a server whose session lock cannot be trusted.
    UnreliableSessionLock {
        server: &'static str,
        reason: &'static str,
    },
}

impl Refusal {
    /// Why `status` and `unlock` have no lock of this strategy to show.
    pub fn nothing_to_inspect(self) -> String {
        match self {
            Refusal::NoSessionLock { database } => format!(
                "{database} has no lock to inspect; runs need --no-lock (`locking = false`) or \
                 --locking lease"
            ),
            Refusal::UnreliableSessionLock { server, reason } => format!(
                "{server} has no session lock to inspect ({reason}); runs need --locking lease"
            ),
        }
    }

    /// The refusal of a run, before anything is read or changed.
    pub fn into_error(self, connection: &str) -> Error {
        let reason = match self {
            Refusal::NoSessionLock { database } => format!(
                "{database} has no named session locks, so this run cannot be locked; nothing was \
                 read or changed. If several processes may migrate this database, use --locking \
                 lease (`locking = \"lease\"`); if a single runner is guaranteed (development, \
                 tests), run with --no-lock (`locking = false`)"
            ),
            Refusal::UnreliableSessionLock { server, reason } => format!(
                "the server is {server}, and {reason}, so a session lock here would protect \
                 nothing; nothing was read or changed. Use --locking lease (`locking = \
                 \"lease\"`), or leave `locking` at its default, which takes the lease on {server}"
            ),
        };
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: connection.to_string(),
            reason,
        })
    }
}

/// Decides the strategy of `locking` on a database that offers `support`.
pub fn resolve_strategy(
    locking: Locking,
    support: LockSupport,
) -> std::result::Result<Resolved, Refusal> {
    let plain = |strategy| {
        Ok(Resolved {
            strategy,
            because: None,
        })
    };
    match (locking, support.session_lock) {
        (Locking::Off, _) => plain(LockStrategy::Off),
        (Locking::Lease, _) => plain(LockStrategy::Lease),
        (Locking::Auto, _) if support.lease_is_native => plain(LockStrategy::Lease),
        (Locking::Auto | Locking::Session, SessionLockSupport::Native) => {
            plain(LockStrategy::Session)
        }
        (Locking::Auto, SessionLockSupport::Unreliable { server, reason }) => Ok(Resolved {
            strategy: LockStrategy::Lease,
            because: Some(format!(
                "the server is {server}, and {reason}: taking the lease lock instead of the \
                 session lock (set `locking = \"lease\"` to say so explicitly)"
            )),
        }),
        (Locking::Session, SessionLockSupport::Unreliable { server, reason }) => {
            Err(Refusal::UnreliableSessionLock { server, reason })
        }
        (Locking::Auto | Locking::Session, SessionLockSupport::Absent) => {
            Err(Refusal::NoSessionLock {
                database: support.database,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQLITE: LockSupport = LockSupport {
        database: "sqlite",
        session_lock: SessionLockSupport::Absent,
        lease_is_native: false,
    };

    const COCKROACH: LockSupport = LockSupport {
        database: "postgres",
        session_lock: SessionLockSupport::Unreliable {
            server: "CockroachDB",
            reason: "its advisory-lock functions are no-ops",
        },
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
            resolve_strategy(Locking::Off, SQLITE).unwrap().strategy,
            LockStrategy::Off
        );
        assert_eq!(
            resolve_strategy(Locking::Auto, LockSupport::session("postgres"))
                .unwrap()
                .strategy,
            LockStrategy::Session
        );
    }

    #[test]
    fn a_server_that_fakes_session_locks_gets_the_lease_by_default_and_refuses_session() {
        let auto = resolve_strategy(Locking::Auto, COCKROACH).unwrap();
        assert_eq!(auto.strategy, LockStrategy::Lease);
        assert!(auto.because.unwrap().contains("CockroachDB"));
        let refused = resolve_strategy(Locking::Session, COCKROACH).unwrap_err();
        let message = refused.into_error("default").to_string();
        assert!(message.contains("CockroachDB"), "{message}");
        assert!(message.contains("--locking lease"), "{message}");
        assert_eq!(
            resolve_strategy(Locking::Lease, COCKROACH)
                .unwrap()
                .strategy,
            LockStrategy::Lease
        );
    }
}
