//! Runners that lose the migration lock half-way, as scenarios that return the guarantee they
//! found broken instead of panicking: the lock tests (`locking.rs`, `lease.rs`) assert that
//! none was, and `planted_faults.rs` that each planted fault breaks one. A setup that goes
//! wrong (a server missing under `DIRTHARA_REQUIRE_SERVERS=1`, a runner that never reaches
//! its step) still panics: that is no finding.
//!
//! Include it with `mod lock_scenarios;` beside `mod support;`.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::servers::{Server, TestDb};
use crate::support::{dirthara, spawn, text, wait_with_watchdog, Migrations};

/// What a scenario found: `None` when its server is missing (skipped, said why); else `Ok`
/// when every guarantee it checks held, or `Err` naming the first that broke, with the
/// evidence.
pub(crate) type Found = Option<Result<(), String>>;

/// Ends the scenario with the broken guarantee unless `held`.
macro_rules! check {
    ($held:expr, $($why:tt)+) => {
        if !$held {
            return Some(Err(format!($($why)+)));
        }
    };
}

/// For the lock tests: every guarantee held (or the scenario was skipped).
pub(crate) fn assert_held(found: Found) {
    if let Some(Err(broken)) = found {
        panic!("{broken}");
    }
}

/// `cmd` with the planted faults `faults` switched on (a `FAILPOINTS` value; empty: none).
fn with_faults(mut cmd: Command, faults: &str) -> Command {
    if !faults.is_empty() {
        cmd.env("FAILPOINTS", faults);
    }
    cmd
}

/// A lock released from inside the session (here by migration 1 itself) is noticed before
/// the next migration: on PostgreSQL by the guard that leads each step's message, on MySQL by
/// the confirmation before each migration. `faults` are planted in the runner.
pub(crate) async fn lock_released_by_a_migration(server: Server, faults: &str) -> Found {
    let release = match server {
        Server::Postgres => "SELECT pg_advisory_unlock_all()",
        Server::Mysql => "DO RELEASE_ALL_LOCKS()",
        Server::Mongo => unreachable!("MongoDB has no session lock"),
    };
    let db = TestDb::create(server).await?;
    let m = Migrations::new();
    m.add(1, "let_go", release, None);
    m.add(2, "next", "CREATE TABLE next_one (id INT)", None);
    let out = with_faults(dirthara(&db.url, m.path(), &["migrate"]), faults)
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    check!(
        out.status.code() == Some(1)
            && stderr.contains("Error [LOCK_LEASE_LOST]")
            && stderr.contains("before migration 2 (next)"),
        "the run did not stop with LOCK_LEASE_LOST before migration 2 once its lock was gone \
         (exit {:?}): {stderr}",
        out.status.code()
    );
    check!(
        !db.tables().await.contains(&"next_one".to_string()),
        "migration 2 ran without the lock"
    );
    let history = db.history().await;
    check!(
        history == vec![(1, 1, "applied".to_string())],
        "history {history:?}, expected migration 1 alone"
    );
    Some(Ok(()))
}

/// A lease on `server` (PostgreSQL or MariaDB) taken away mid-migration (`unlock --force`,
/// then another runner takes it): the first runner stops before its next migration, and
/// leaves the new holder's lease alone as it lets go (release deletes only its own).
/// `faults` are planted in that runner.
pub(crate) async fn lost_lease_spares_the_new_holder(server: Server, faults: &str) -> Found {
    let db = TestDb::create(server).await?;
    let m = Migrations::new();
    m.add(1, "slow", &server.sleep(2.0), None);
    m.add(2, "next", "CREATE TABLE next_one (id INT)", None);
    let first = spawn(with_faults(
        dirthara(&db.url, m.path(), &["migrate", "--locking", "lease"]),
        faults,
    ));
    let started = Instant::now();
    let running = match server {
        Server::Postgres => {
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() \
             AND query LIKE '%pg_sleep(2%' AND pid <> pg_backend_pid()"
        }
        _ => {
            "SELECT CAST(INFO AS CHAR) FROM information_schema.PROCESSLIST \
             WHERE DB = DATABASE() AND INFO LIKE '%SLEEP(2%' AND ID <> CONNECTION_ID()"
        }
    };
    while db.strings(running).await.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never reached the sleep"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // An operator force-unlocks, and another runner takes the lease.
    let out = dirthara(
        &db.url,
        m.path(),
        &["unlock", "--force", "--locking", "lease"],
    )
    .output()
    .unwrap();
    assert!(
        text(&out)
            .0
            .contains("deleted the lease held by `dirthara migrate"),
        "{:?}",
        text(&out)
    );
    let in_ten_minutes = match server {
        Server::Postgres => "now(), now() + interval '10 minutes'",
        _ => "UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE",
    };
    db.execute(&format!(
        "INSERT INTO dirthara_migrations_lock (id, owner_id, hostname, pid, operation, acquired_at, expires_at) \
         VALUES ('dirthara:migrations', 'intruder', 'other-host', 1, 'migrate', {in_ten_minutes})"
    ))
    .await;

    let first = wait_with_watchdog(first, Duration::from_secs(90));
    let (_, stderr) = text(&first);
    check!(
        first.status.code() == Some(1)
            && stderr.contains("Error [LOCK_LEASE_LOST]")
            && stderr.contains("before migration 2 (next)"),
        "the run did not stop with LOCK_LEASE_LOST before migration 2 once its lease was gone \
         (exit {:?}): {stderr}",
        first.status.code()
    );
    check!(
        !db.tables().await.contains(&"next_one".to_string()),
        "migration 2 ran without the lease"
    );
    let owners = db
        .strings("SELECT owner_id FROM dirthara_migrations_lock")
        .await;
    check!(
        owners == vec!["intruder".to_string()],
        "the new holder's lease was deleted: lease owners now {owners:?}"
    );
    check!(
        stderr.contains("warning [LOCK_LEASE_EXPIRED]"),
        "no LOCK_LEASE_EXPIRED warning for the lease that was no longer ours: {stderr}"
    );
    Some(Ok(()))
}
