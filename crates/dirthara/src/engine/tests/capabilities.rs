//! Engine branches that depend on what a backend can do, reached on the in-memory backend by
//! declaring the capability: a lock check carried inside the step (PostgreSQL), or by the
//! marker before it (MySQL/MariaDB), and a step's completion folded into the next marker
//! (MySQL/MariaDB).

use super::*;

#[tokio::test]
async fn a_step_that_carries_the_lock_check_needs_no_separate_check_and_a_lost_lock_is_named() {
    for checks_in_step in [true, false] {
        let db = db();
        db.lock().unwrap().checks_lock_in_step = checks_in_step;
        let migrations = vec![
            migration(1, "create a", Some("drop a")),
            migration(2, "create b\nlose-lock", Some("drop b")),
            migration(3, "create c", Some("drop c")),
        ];
        let err = migrator(&db, migrations).migrate().await.unwrap_err();
        assert_eq!(err.code(), Code::LockLeaseLost, "in step: {checks_in_step}");
        assert!(
            err.to_string().contains("before migration 3 (m3)"),
            "in step: {checks_in_step}: {err}"
        );
        let state = db.lock().unwrap();
        assert!(!state.tables.contains("c"), "in step: {checks_in_step}");
        assert_eq!(
            state
                .history
                .as_ref()
                .unwrap()
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        // Every step carried the check exactly when the backend can carry it.
        let carried = if checks_in_step { 3 } else { 0 };
        assert_eq!(state.lock_checked_steps, carried);
    }
}

#[tokio::test]
async fn a_marker_that_carries_the_lock_check_needs_no_separate_check_and_a_lost_lock_is_named() {
    for in_marker in [true, false] {
        let db = db();
        {
            let mut state = db.lock().unwrap();
            state.non_transactional = true;
            state.folds_records = true;
            state.checks_lock_in_marker = in_marker;
        }
        let migrations = vec![
            migration(1, "create a", Some("drop a")),
            migration(2, "create b\nlose-lock", Some("drop b")),
            migration(3, "create c", Some("drop c")),
        ];
        let err = migrator(&db, migrations).migrate().await.unwrap_err();
        assert_eq!(err.code(), Code::LockLeaseLost, "in marker: {in_marker}");
        assert!(
            err.to_string().contains("before migration 3 (m3)"),
            "in marker: {in_marker}: {err}"
        );
        let state = db.lock().unwrap();
        assert!(!state.tables.contains("c"), "in marker: {in_marker}");
        // Migration 2 ran: its completion is written; 3 has no marker.
        let history = state.history.as_ref().unwrap();
        assert_eq!(history.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(history[&2].state, crate::history::RecordState::Applied);
        // The marker carried the check, or a separate one came before each step.
        let confirms = state.calls.iter().filter(|c| *c == "confirm lock").count();
        let guarded = state
            .calls
            .iter()
            .filter(|c| *c == "guarded marker")
            .count();
        match in_marker {
            true => assert_eq!((confirms, guarded), (0, 3), "{:?}", state.calls),
            false => assert_eq!((confirms, guarded), (3, 0), "{:?}", state.calls),
        }
    }
}

#[tokio::test]
async fn a_server_that_fakes_its_session_lock_gets_the_lease_and_the_run_says_so() {
    let db = db();
    db.lock().unwrap().fakes_session_lock = true;
    let chosen = Arc::new(Mutex::new(Vec::new()));
    let seen = chosen.clone();
    let sink = EventSink::new(move |event| {
        if let EventKind::LockChosen {
            strategy, reason, ..
        } = &event.kind
        {
            seen.lock().unwrap().push((*strategy, reason.clone()));
        }
    });
    let report = migrator(&db, three())
        .with_events(sink)
        .migrate()
        .await
        .unwrap();
    assert_eq!(report.lock, LockStrategy::Lease);
    assert_eq!(report.applied.len(), 3);
    let chosen = chosen.lock().unwrap().clone();
    assert_eq!(chosen.len(), 1, "{chosen:?}");
    assert_eq!(chosen[0].0, LockStrategy::Lease);
    assert!(chosen[0].1.contains("CockroachDB"), "{chosen:?}");
    assert!(
        !calls(&db).contains(&"lock".to_string()),
        "no session lock taken"
    );
    // Asked for by name, the session lock is refused before anything runs.
    let db = self::db();
    db.lock().unwrap().fakes_session_lock = true;
    let mut config = migrator(&db, three()).config().clone();
    config.locking = Locking::Session;
    let err = Migrator::new(config)
        .with_connector(Arc::new(MemoryConnector(db.clone())))
        .with_migrations(three())
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::MigrationLockFailed, "{err}");
    assert!(err.to_string().contains("--locking lease"), "{err}");
    assert!(applied_versions(&db).is_empty());
}

#[tokio::test]
async fn a_step_that_fails_on_its_own_while_carrying_the_check_keeps_its_own_error() {
    let db = db();
    db.lock().unwrap().checks_lock_in_step = true;
    let migrations = vec![migration(1, "create a\nfail syntax error", Some("drop a"))];
    let err = migrator(&db, migrations).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed, "{err}");
    assert!(err.to_string().contains("syntax error"), "{err}");
}

#[tokio::test]
async fn folding_records_writes_each_completion_with_the_next_marker() {
    let db = db();
    {
        let mut state = db.lock().unwrap();
        state.non_transactional = true;
        state.folds_records = true;
    }
    migrator(&db, three()).migrate().await.unwrap();
    let calls = calls(&db);
    let steps: Vec<&str> = (calls.iter())
        .map(String::as_str)
        .filter(|c| c.starts_with("step") || c.starts_with("record"))
        .collect();
    // Marker 1; completion 1 with marker 2; completion 2 with marker 3; completion 3 alone.
    assert_eq!(
        steps,
        [
            "record",
            "step on default",
            "record x2",
            "step on default",
            "record x2",
            "step on default",
            "record"
        ]
    );
    let state = db.lock().unwrap();
    let history = state.history.as_ref().unwrap();
    assert!(history
        .values()
        .all(|r| r.state == crate::history::RecordState::Applied));
}

#[tokio::test]
async fn without_folding_each_completion_is_written_on_its_own() {
    let db = db();
    db.lock().unwrap().non_transactional = true;
    migrator(&db, three()).migrate().await.unwrap();
    let calls = calls(&db);
    let records = calls.iter().filter(|c| *c == "record").count();
    // A marker and a completion per migration, each its own write.
    assert_eq!(records, 6);
}

#[tokio::test]
async fn a_folded_completion_is_reported_done_only_once_its_record_is_written() {
    let db = db();
    {
        let mut state = db.lock().unwrap();
        state.non_transactional = true;
        state.folds_records = true;
    }
    let finished = Arc::new(Mutex::new(Vec::new()));
    let seen = finished.clone();
    let sink = EventSink::new(move |event| {
        if let EventKind::MigrationFinished { version, .. } = &event.kind {
            seen.lock().unwrap().push(*version);
        }
    });
    let migrations = vec![
        migration(1, "create a", Some("drop a")),
        // Its step ran; then the history connection is gone, so neither its record nor
        // migration 3's marker can be written.
        migration(2, "create b\nbreak-history", Some("drop b")),
        migration(3, "create c", Some("drop c")),
    ];
    let err = migrator(&db, migrations)
        .with_events(sink)
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::HistoryError, "{err}");
    let completed: Vec<i64> = err.completed().iter().map(|s| s.version).collect();
    assert_eq!(completed, [1], "2 ran but was never recorded: {err:?}");
    assert_eq!(*finished.lock().unwrap(), [1]);
    let state = db.lock().unwrap();
    let history = state.history.as_ref().unwrap();
    assert_eq!(history[&2].state, crate::history::RecordState::Running);
}
