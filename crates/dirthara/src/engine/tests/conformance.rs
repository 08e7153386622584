//! The backend conformance checks of `tests/conformance/checks.rs`, run on the in-memory
//! backend. They are included here rather than run from `tests/`: the in-memory backend is
//! compiled into the crate's own tests only, so it needs no feature, URL scheme or public
//! type that a real build would carry. Its rows declare what the real databases do (a
//! session lock or a lease; transactional DDL or MySQL's commits statement by statement),
//! so each check's branches are reached without a server.

#[path = "../../../tests/conformance/checks.rs"]
mod checks;

use std::future::Future;
use std::sync::{Arc, Mutex};

use checks::Target;

use crate::backend::memory::{MemoryConnector, MemoryDb, SharedDb};
use crate::{Config, LockStrategy, Locking, Migrator};

/// What the in-memory database imitates.
#[derive(Clone, Copy)]
enum Imitates {
    /// PostgreSQL: transactional DDL, the session lock checked inside each step.
    Postgres,
    /// MySQL/MariaDB: DDL commits at once, and a step's completion is folded into the next
    /// step's marker.
    Mysql,
}

/// One row: an in-memory database and the `locking` it is migrated with.
struct MemoryRow {
    db: SharedDb,
    locking: Locking,
}

impl MemoryRow {
    fn new(imitates: Imitates, locking: Locking) -> impl Future<Output = Option<MemoryRow>> {
        let db = MemoryDb {
            non_transactional: matches!(imitates, Imitates::Mysql),
            folds_records: matches!(imitates, Imitates::Mysql),
            checks_lock_in_step: matches!(imitates, Imitates::Postgres),
            ..MemoryDb::default()
        };
        let db = Arc::new(Mutex::new(db));
        async move { Some(MemoryRow { db, locking }) }
    }
}

impl Target for MemoryRow {
    fn transactional_ddl(&self) -> bool {
        !self.db.lock().unwrap().non_transactional
    }

    fn strategy(&self) -> LockStrategy {
        match self.locking {
            Locking::Off => LockStrategy::Off,
            Locking::Lease => LockStrategy::Lease,
            _ => LockStrategy::Session,
        }
    }

    fn migrator(&self, configure: &dyn Fn(&mut Config)) -> Migrator {
        let mut config = Config::with_url("memory://conformance");
        config.locking = self.locking;
        configure(&mut config);
        Migrator::new(config).with_connector(Arc::new(MemoryConnector(self.db.clone())))
    }

    fn drop_table(&self, table: &str) -> impl Future<Output = ()> {
        let dropped = self.db.lock().unwrap().tables.remove(table);
        assert!(dropped, "no table {table} to drop");
        std::future::ready(())
    }

    // The in-memory backend's own language (`backend/memory.rs`).

    fn extension(&self) -> &'static str {
        "sql"
    }

    fn create(&self, table: &str) -> String {
        format!("create {table}")
    }

    fn create_changed(&self, table: &str) -> String {
        format!("-- changed\ncreate {table}")
    }

    fn drop(&self, table: &str) -> String {
        format!("drop {table}")
    }

    fn broken(&self, table: &str) -> String {
        format!("create {table}\nfail no such table")
    }
}

checks::conformance_tests! {
    memory_session_lock => MemoryRow::new(Imitates::Postgres, Locking::Auto),
    memory_lease => MemoryRow::new(Imitates::Postgres, Locking::Lease),
    memory_without_transactional_ddl => MemoryRow::new(Imitates::Mysql, Locking::Auto),
}
