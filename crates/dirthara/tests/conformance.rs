//! The backend conformance checks (`conformance/checks.rs`, one function per guarantee) on
//! every real backend and lock strategy: one row each, one test per check and row, named
//! `<row>::<check>`. The same checks run on the in-memory backend inside the crate
//! (`src/engine/tests/conformance.rs`).
//!
//! Adding a backend, or a lock strategy of one, is one row below.

#[path = "conformance/checks.rs"]
mod checks;
#[path = "conformance/lock_checks.rs"]
mod lock_checks;
#[path = "conformance/targets.rs"]
mod targets;

use dirthara::Locking;
use dirthara_test_kit::servers::Server;
use targets::Row;

checks::conformance_tests! {
    sqlite_unlocked => Row::sqlite(Locking::Off),
    sqlite_lease => Row::sqlite(Locking::Lease),
    postgres_session_lock => Row::server(Server::Postgres, Locking::Auto),
    postgres_lease => Row::server(Server::Postgres, Locking::Lease),
    mysql_session_lock => Row::server(Server::Mysql, Locking::Auto),
    mysql_lease => Row::server(Server::Mysql, Locking::Lease),
    // `Auto`: the native strategy, which on MongoDB is the lease.
    mongodb_lease => Row::server(Server::Mongo, Locking::Auto),
}

/// The lock's own checks, on the same rows (`lock::<row>::<check>`).
mod lock {
    use super::*;

    crate::lock_checks::conformance_lock_tests! {
        sqlite_unlocked => Row::sqlite(Locking::Off),
        sqlite_lease => Row::sqlite(Locking::Lease),
        postgres_session_lock => Row::server(Server::Postgres, Locking::Auto),
        postgres_lease => Row::server(Server::Postgres, Locking::Lease),
        mysql_session_lock => Row::server(Server::Mysql, Locking::Auto),
        mysql_lease => Row::server(Server::Mysql, Locking::Lease),
        mongodb_lease => Row::server(Server::Mongo, Locking::Auto),
    }
}
