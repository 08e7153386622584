//! Engine tests on the in-memory backend: no database, instant. Slightly over 400 lines: they
//! share one in-memory database and its call log, which split files would each repeat.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::backend::memory::{MemoryConnector, MemoryDb, SharedDb};
use crate::config::{LockWait, Locking};
use crate::error::ErrorKind;
use crate::events::{Event, EventKind};
use crate::lock::LOCK_NAME;
use crate::plan::RollbackScope;
use crate::plan::{Command, Resolution};
use crate::vocabulary::LockStrategy;
use crate::Code;

mod capabilities;
mod conformance;
mod retries;

fn db() -> SharedDb {
    Arc::new(Mutex::new(MemoryDb::default()))
}

fn migration(version: i64, up: &str, down: Option<&str>) -> Migration {
    let m = Migration::new(version, format!("m{version}"), up);
    match down {
        Some(down) => m.with_down(down),
        None => m,
    }
}

fn three() -> Vec<Migration> {
    vec![
        migration(1, "create a", Some("drop a")),
        migration(2, "create b", Some("drop b")),
        migration(3, "create c", Some("drop c")),
    ]
}

fn migrator(db: &SharedDb, migrations: Vec<Migration>) -> Migrator {
    let mut config = Config::with_url("memory://test");
    config.directories = Vec::new();
    config
        .connections
        .insert("analytics".into(), "memory://analytics".into());
    Migrator::new(config)
        .with_connector(Arc::new(MemoryConnector(db.clone())))
        .with_migrations(migrations)
}

fn calls(db: &SharedDb) -> Vec<String> {
    db.lock().unwrap().calls.clone()
}

fn position(calls: &[String], call: &str) -> usize {
    calls
        .iter()
        .position(|c| c == call)
        .unwrap_or_else(|| panic!("no `{call}` in {calls:?}"))
}

fn applied_versions(db: &SharedDb) -> Vec<i64> {
    let db = db.lock().unwrap();
    db.history
        .as_ref()
        .map(|h| h.keys().copied().collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_lock_is_taken_before_the_history_is_read_and_released_last() {
    let db = db();
    let report = migrator(&db, three()).migrate().await.unwrap();
    assert_eq!(report.applied.len(), 3);
    assert_eq!(report.batch, Some(1));
    let calls = calls(&db);
    assert_eq!(calls[0], "connect default");
    assert_eq!(calls[1], "lock");
    assert!(position(&calls, "lock") < position(&calls, "prepare"));
    // `prepare` reads the history as it prepares it: nothing is read before the lock.
    assert!(!calls[..position(&calls, "lock")]
        .iter()
        .any(|c| c == "read"));
    let unlock = position(&calls, "unlock");
    assert_eq!(&calls[unlock..], ["unlock", "close"]);
    assert_eq!(db.lock().unwrap().lock_holder, None);
}

#[tokio::test]
async fn the_lock_is_released_after_a_failing_migration_and_earlier_steps_stay_recorded() {
    let db = db();
    let migrations = vec![
        migration(1, "create a", Some("drop a")),
        migration(2, "create b\nfail syntax error near x", Some("drop b")),
        migration(3, "create c", Some("drop c")),
    ];
    let err = migrator(&db, migrations).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed);
    assert!(
        err.to_string()
            .contains("migration 2 (m2) failed while running up"),
        "{err}"
    );
    assert!(err.to_string().contains("syntax error near x"));
    assert_eq!(err.completed().len(), 1);
    assert_eq!(applied_versions(&db), vec![1]);
    let state = db.lock().unwrap();
    assert_eq!(state.lock_holder, None);
    assert!(state.tables.contains("a") && !state.tables.contains("b"));
    assert!(state.calls.contains(&"unlock".to_string()));
}

#[tokio::test]
async fn the_lock_is_released_after_a_planning_error_and_nothing_runs() {
    let db = db();
    migrator(&db, three()).migrate().await.unwrap();
    let mut edited = three();
    edited[1] = migration(2, "create b2", Some("drop b"));
    let err = migrator(&db, edited).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::ChecksumMismatch);
    let state = db.lock().unwrap();
    assert_eq!(state.lock_holder, None);
    assert_eq!(state.calls.last().map(String::as_str), Some("close"));
}

#[tokio::test]
async fn a_release_failure_is_attached_to_the_primary_error_not_substituted() {
    let db = db();
    db.lock().unwrap().fail_unlock = true;
    let migrations = vec![migration(1, "fail boom", None)];
    let err = migrator(&db, migrations).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed);
    let secondary = err.secondary().expect("release failure attached");
    assert_eq!(secondary.code(), Code::MigrationLockFailed);
    assert_eq!(secondary.lock_context(), Some((LOCK_NAME, "default")));
}

#[tokio::test]
async fn a_release_failure_after_success_is_an_error_of_its_own() {
    let db = db();
    db.lock().unwrap().fail_unlock = true;
    let err = migrator(&db, three()).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationLockFailed);
    assert!(err.secondary().is_none());
    // What was done is still reported, and the session's end released the lock.
    assert_eq!(applied_versions(&db), vec![1, 2, 3]);
    assert_eq!(db.lock().unwrap().lock_holder, None);
}

#[tokio::test]
async fn a_waiting_runner_plans_against_what_the_holder_left_and_finds_nothing_to_do() {
    let db = db();
    let first = migrator(&db, three());
    // Another runner holds the lock...
    db.lock().unwrap().lock_holder = Some(999);
    let waiter = tokio::spawn({
        let m = migrator(&db, three());
        async move { m.migrate().await }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!waiter.is_finished(), "the second runner must wait");
    // ...applies everything (we play it by hand with the lock held by 999) and releases.
    db.lock().unwrap().lock_holder = None;
    first.migrate().await.unwrap();
    let report = waiter.await.unwrap().unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(applied_versions(&db), vec![1, 2, 3]);
}

#[tokio::test]
async fn a_wait_that_runs_out_fails_with_lock_held_and_never_takes_the_lock_later() {
    let db = db();
    db.lock().unwrap().lock_holder = Some(999);
    let mut m = migrator(&db, three());
    m.config.lock_wait = Some(LockWait::For(Duration::from_millis(40)));
    let err = m.migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationLockHeld);
    assert!(err.to_string().contains("dirthara migrate test:1"), "{err}");
    db.lock().unwrap().lock_holder = None;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let state = db.lock().unwrap();
    assert_eq!(state.lock_holder, None);
    assert!(state.history.is_none(), "nothing was read or written");
}

#[tokio::test]
async fn a_lost_lock_stops_the_run_before_the_next_migration() {
    let db = db();
    let migrations = vec![
        migration(1, "create a\nlose-lock", Some("drop a")),
        migration(2, "create b", Some("drop b")),
    ];
    let err = migrator(&db, migrations).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::LockLeaseLost);
    assert!(err.to_string().contains("before migration 2 (m2)"), "{err}");
    assert_eq!(applied_versions(&db), vec![1]);
    assert!(!db.lock().unwrap().tables.contains("b"));
    // The lock belongs to someone else now: we must not have released it.
    assert_eq!(db.lock().unwrap().lock_holder, Some(u64::MAX));
}

#[tokio::test]
async fn a_non_transactional_failure_leaves_a_dirty_record_that_resolve_clears() {
    let db = db();
    db.lock().unwrap().non_transactional = true;
    let migrations = vec![
        migration(1, "create a", Some("drop a")),
        migration(2, "create b\nfail lost connection", Some("drop b")),
    ];
    let err = migrator(&db, migrations.clone())
        .migrate()
        .await
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::MigrationFailed {
            left_dirty: true,
            ..
        }
    ));
    assert!(
        err.to_string().contains("dirthara resolve 2 --applied"),
        "{err}"
    );

    let err = migrator(&db, migrations.clone())
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DirtyMigration);
    assert!(err.to_string().contains("migration 2 (m2)"));

    // The operator drops the half-created table and records the rollback.
    db.lock().unwrap().tables.remove("b");
    let fixed = vec![
        migrations[0].clone(),
        migration(2, "create b", Some("drop b")),
    ];
    let report = migrator(&db, fixed.clone())
        .resolve(2, Resolution::RolledBack)
        .await
        .unwrap();
    assert_eq!(report.recorded.len(), 1);
    let report = migrator(&db, fixed).migrate().await.unwrap();
    assert_eq!(
        report.applied.iter().map(|s| s.version).collect::<Vec<_>>(),
        vec![2]
    );
}

#[tokio::test]
async fn refresh_and_fresh_hold_one_lock_for_both_halves() {
    let db = db();
    migrator(&db, three()).migrate().await.unwrap();
    db.lock().unwrap().calls.clear();
    let report = migrator(&db, three()).refresh().await.unwrap();
    assert_eq!((report.reverted.len(), report.applied.len()), (3, 3));
    let c = calls(&db);
    assert_eq!(c.iter().filter(|c| *c == "lock").count(), 1);
    assert_eq!(c.iter().filter(|c| *c == "unlock").count(), 1);

    db.lock().unwrap().tables.insert("stray".into());
    db.lock().unwrap().calls.clear();
    let report = migrator(&db, three()).fresh().await.unwrap();
    assert!(report.dropped.contains(&"stray".to_string()));
    assert_eq!(report.applied.len(), 3);
    let c = calls(&db);
    assert_eq!(c.iter().filter(|c| *c == "lock").count(), 1);
    assert!(position(&c, "drop_all") < position(&c, "unlock"));
    assert!(!db.lock().unwrap().tables.contains("stray"));
}

#[tokio::test]
async fn rollback_reverses_the_last_batch_newest_first() {
    let db = db();
    migrator(&db, three()[..2].to_vec())
        .migrate()
        .await
        .unwrap();
    migrator(&db, three()).migrate().await.unwrap();
    let report = migrator(&db, three())
        .rollback(RollbackScope::LastBatch)
        .await
        .unwrap();
    assert_eq!(
        report
            .reverted
            .iter()
            .map(|s| s.version)
            .collect::<Vec<_>>(),
        vec![3]
    );
    let report = migrator(&db, three()).migrate_to(0).await.unwrap();
    assert_eq!(
        report
            .reverted
            .iter()
            .map(|s| s.version)
            .collect::<Vec<_>>(),
        vec![2, 1]
    );
    assert!(db.lock().unwrap().tables.is_empty());
}

#[tokio::test]
async fn an_interrupt_finishes_nothing_more_and_names_what_was_left() {
    let db = db();
    let (tx, rx) = watch::channel(false);
    // The signal comes once the lock is held, before the first migration.
    let sink = EventSink::new(move |event| {
        if matches!(event.kind, EventKind::LockAcquired { .. }) {
            tx.send(true).unwrap();
        }
    });
    let err = migrator(&db, three())
        .with_shutdown(rx)
        .with_events(sink)
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Interrupted);
    assert!(!err.interrupted_before_start());
    assert!(err.to_string().contains("1 m1, 2 m2, 3 m3"), "{err}");
    assert_eq!(db.lock().unwrap().lock_holder, None);
}

#[tokio::test]
async fn an_interrupt_before_the_lock_stops_at_once_and_touches_nothing() {
    let db = db();
    let (tx, rx) = watch::channel(false);
    tx.send(true).unwrap();
    let err = migrator(&db, three())
        .with_shutdown(rx)
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Interrupted);
    assert!(err.interrupted_before_start());
    assert!(
        err.to_string().contains("before the lock was taken"),
        "{err}"
    );
    let calls = calls(&db);
    assert!(
        !calls.iter().any(|c| c == "lock" || c == "prepare"),
        "{calls:?}"
    );
}

#[tokio::test]
async fn running_unlocked_takes_no_lock_and_says_so() {
    let db = db();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let events = events.clone();
        EventSink::new(move |e| events.lock().unwrap().push(e.clone()))
    };
    let mut m = migrator(&db, three()).with_events(sink);
    m.config.locking = Locking::Off;
    let report = m.migrate().await.unwrap();
    assert_eq!(report.lock, LockStrategy::Off);
    assert!(!calls(&db).contains(&"lock".to_string()));
    assert!(matches!(
        events.lock().unwrap()[0].kind,
        EventKind::Unlocked { .. }
    ));
}

#[tokio::test]
async fn a_migration_on_another_connection_runs_there_while_history_and_lock_stay_home() {
    let db = db();
    let mut m = migration(1, "create facts", Some("drop facts"));
    m.connection = "analytics".into();
    let report = migrator(&db, vec![m]).migrate().await.unwrap();
    assert_eq!(report.applied[0].connection, "analytics");
    let c = calls(&db);
    assert!(c.contains(&"connect analytics".to_string()));
    assert!(c.contains(&"step on analytics".to_string()));
    // The lock was taken once, by the history connection, before the other one was opened.
    assert_eq!(c.iter().filter(|c| *c == "lock").count(), 1);
    assert!(position(&c, "lock") < position(&c, "connect analytics"));
    assert_eq!(applied_versions(&db), vec![1]);
}

#[tokio::test]
async fn status_and_preview_take_no_lock_and_create_nothing() {
    let db = db();
    let status = migrator(&db, three()).status().await.unwrap();
    assert_eq!(status.migrations.len(), 3);
    assert!(matches!(status.lock.state, crate::report::LockState::Free));
    let preview = migrator(&db, three())
        .preview(Command::Migrate)
        .await
        .unwrap();
    assert_eq!(preview.steps.len(), 3);
    assert_eq!(preview.steps[0].sql, "create a");
    let c = calls(&db);
    assert!(
        !c.contains(&"lock".to_string()) && !c.contains(&"prepare".to_string()),
        "{c:?}"
    );
    assert!(db.lock().unwrap().history.is_none());
}

#[tokio::test]
async fn baseline_records_without_running() {
    let db = db();
    let report = migrator(&db, three()).baseline(2).await.unwrap();
    assert_eq!(report.recorded.len(), 2);
    assert!(db.lock().unwrap().tables.is_empty());
    let report = migrator(&db, three()).migrate().await.unwrap();
    assert_eq!(
        report.applied.iter().map(|s| s.version).collect::<Vec<_>>(),
        vec![3]
    );
    assert_eq!(report.batch, Some(2));
}

fn lease_migrator(db: &SharedDb, migrations: Vec<Migration>) -> Migrator {
    let mut m = migrator(db, migrations);
    m.config.locking = Locking::Lease;
    m
}

#[tokio::test]
async fn a_lease_run_takes_and_releases_the_lease_and_never_the_session_lock() {
    let db = db();
    let report = lease_migrator(&db, three()).migrate().await.unwrap();
    assert_eq!(
        (report.applied.len(), report.lock),
        (3, LockStrategy::Lease)
    );
    let state = db.lock().unwrap();
    assert!(!state.calls.contains(&"lock".to_string()));
    assert_eq!(state.lease.owner(), None, "released at the end");
}

#[tokio::test]
async fn a_held_lease_fails_at_once_and_changes_nothing() {
    let db = db();
    db.lock().unwrap().lease.put_owner("other-runner");
    let err = lease_migrator(&db, three()).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationLockHeld);
    let state = db.lock().unwrap();
    assert!(state.history.is_none());
    assert_eq!(state.lease.owner().as_deref(), Some("other-runner"));
}

#[tokio::test]
async fn a_lost_lease_stops_before_the_next_migration_and_the_thiefs_lease_survives() {
    let db = db();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let events = events.clone();
        EventSink::new(move |e| events.lock().unwrap().push(e.clone()))
    };
    let migrations = vec![
        migration(1, "create a\nsteal-lease", Some("drop a")),
        migration(2, "create b", Some("drop b")),
    ];
    let err = lease_migrator(&db, migrations)
        .with_events(sink)
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::LockLeaseLost);
    assert!(err.to_string().contains("before migration 2 (m2)"), "{err}");
    assert_eq!(applied_versions(&db), vec![1]);
    assert_eq!(db.lock().unwrap().lease.owner().as_deref(), Some("thief"));
    let warned = events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Warning(w) if w.code == Code::LockLeaseExpired));
    assert!(warned, "LOCK_LEASE_EXPIRED is reported at release");
}

#[tokio::test]
async fn status_reports_a_malformed_lease_as_held() {
    let db = db();
    db.lock()
        .unwrap()
        .lease
        .put_malformed(crate::lock::lease::memory::Expiry::Text("tomorrow".into()));
    let status = lease_migrator(&db, three()).status().await.unwrap();
    assert!(matches!(
        status.lock.state,
        crate::report::LockState::Held {
            malformed: true,
            ..
        }
    ));
    let json = serde_json::to_value(&status.lock).unwrap();
    assert_eq!(
        (json["state"].as_str(), json["malformed"].as_bool()),
        (Some("held"), Some(true))
    );
    let report = lease_migrator(&db, three()).force_unlock().await.unwrap();
    assert_eq!(report.released.len(), 1);
    assert_eq!(db.lock().unwrap().lease.owner(), None);
}
