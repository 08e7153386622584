//! Giving way to the application's table locks, on the in-memory backend with tokio's clock
//! paused (the pauses between attempts pass at once): a step whose statement waits for its
//! table lock gives way after `table_lock_timeout` and is tried again until the lock is free
//! or `table_lock_retry_for` runs out.

use super::*;

fn blocked(db: &SharedDb, attempts: u32) {
    let mut state = db.lock().unwrap();
    state.table_locks = true;
    state.blocked_attempts = attempts;
}

fn retries(events: &Arc<Mutex<Vec<Event>>>) -> Vec<(u32, Duration, Duration)> {
    (events.lock().unwrap().iter())
        .filter_map(|e| match e.kind {
            EventKind::TableLockTimeout {
                attempt,
                retry_in,
                budget_left,
                ..
            } => Some((attempt, retry_in, budget_left)),
            _ => None,
        })
        .collect()
}

fn recording() -> (Arc<Mutex<Vec<Event>>>, EventSink) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    (
        events,
        EventSink::new(move |e| seen.lock().unwrap().push(e.clone())),
    )
}

fn waiting() -> Vec<Migration> {
    vec![
        migration(1, "create a", Some("drop a")),
        migration(2, "create users_col\nwait-lock", Some("drop users_col")),
        migration(3, "create c", Some("drop c")),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_step_that_gives_way_is_tried_again_until_the_lock_is_free() {
    let db = db();
    blocked(&db, 2);
    let (events, sink) = recording();
    let report = migrator(&db, waiting())
        .with_events(sink)
        .migrate()
        .await
        .unwrap();
    assert_eq!(report.applied.len(), 3);
    let retried = retries(&events);
    assert_eq!(retried.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2]);
    // The application may be blocked for a quarter of the time at most: after a 2 s wait the
    // pause is at least 3 timeouts.
    assert!(retried[0].1 >= Duration::from_secs(6), "{retried:?}");
    let state = db.lock().unwrap();
    assert_eq!(
        state.lock_timeouts,
        vec![Some(Duration::from_secs(2)); 5],
        "every attempt of every step runs with the timeout"
    );
    assert!(state.tables.contains("users_col"));
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_fails_with_table_lock_timeout_and_leaves_nothing_applied() {
    let db = db();
    blocked(&db, u32::MAX);
    let mut m = migrator(&db, waiting());
    m.config.table_lock_retry_for = Duration::from_secs(60);
    let err = m.migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::TableLockTimeout, "{err}");
    let ErrorKind::TableLockTimeout {
        attempts,
        left_dirty,
        error,
        ..
    } = err.kind()
    else {
        panic!("{err:?}")
    };
    assert!(*attempts >= 2 && !left_dirty, "{err:?}");
    assert_eq!(error.table.as_deref(), Some("users"));
    assert!(err.to_string().contains("Nothing was applied"), "{err}");
    assert!(err.to_string().contains("--table-lock-retry-for"), "{err}");
    assert_eq!(
        applied_versions(&db),
        vec![1],
        "2 was not recorded, 3 not started"
    );
    assert!(!db.lock().unwrap().tables.contains("users_col"));
}

#[tokio::test(start_paused = true)]
async fn a_zero_budget_makes_one_attempt() {
    let db = db();
    blocked(&db, 1);
    let mut m = migrator(&db, waiting());
    m.config.table_lock_retry_for = Duration::ZERO;
    let err = m.migrate().await.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::TableLockTimeout { attempts: 1, .. }),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_signal_between_attempts_stops_with_the_step_not_applied() {
    let db = db();
    blocked(&db, u32::MAX);
    let (stop, shutdown) = watch::channel(false);
    let sink = EventSink::new(move |event| {
        if matches!(event.kind, EventKind::TableLockTimeout { .. }) {
            let _ = stop.send(true);
        }
    });
    let err = migrator(&db, waiting())
        .with_shutdown(shutdown)
        .with_events(sink)
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Interrupted, "{err}");
    assert!(err.to_string().contains("left undone: 2 m2, 3 m3"), "{err}");
    assert_eq!(applied_versions(&db), vec![1]);
    assert_eq!(db.lock().unwrap().lock_holder, None);
}

#[tokio::test(start_paused = true)]
async fn off_and_the_directive_set_each_steps_timeout() {
    let db = db();
    blocked(&db, 0);
    let mut migrations = waiting();
    migrations[0].table_lock_timeout = Some("off".into());
    migrations[1].table_lock_timeout = Some("5s".into());
    let mut m = migrator(&db, migrations);
    m.config.table_lock_timeout = Some(Duration::from_millis(1500));
    m.migrate().await.unwrap();
    assert_eq!(
        db.lock().unwrap().lock_timeouts,
        [
            None,
            Some(Duration::from_secs(5)),
            Some(Duration::from_millis(1500))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_that_manages_its_own_transaction_is_never_retried() {
    let db = db();
    blocked(&db, 1);
    let mut migrations = waiting();
    migrations[1].own_transaction = Some("`BEGIN` at line 1 of the up step".into());
    migrations[1].transactional = false;
    let err = migrator(&db, migrations).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed, "{err}");
    let ErrorKind::MigrationFailed { error, .. } = err.kind() else {
        unreachable!()
    };
    assert!(error.lock_not_available);
    assert_eq!(db.lock().unwrap().blocked_attempts, 0, "one attempt");
}

#[tokio::test(start_paused = true)]
async fn without_table_locks_nothing_gives_way() {
    let db = db();
    {
        let mut state = db.lock().unwrap();
        state.blocked_attempts = 5;
    }
    migrator(&db, waiting()).migrate().await.unwrap();
    assert_eq!(db.lock().unwrap().lock_timeouts, [None, None, None]);
}

#[tokio::test(start_paused = true)]
async fn the_migration_lock_is_confirmed_before_every_attempt() {
    let db = db();
    blocked(&db, 1);
    let shared = db.clone();
    // Between the attempts, another operator takes the lock away.
    let sink = EventSink::new(move |event| {
        if matches!(event.kind, EventKind::TableLockTimeout { .. }) {
            shared.lock().unwrap().lock_holder = Some(u64::MAX);
        }
    });
    let err = migrator(&db, waiting())
        .with_events(sink)
        .migrate()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::LockLeaseLost, "{err}");
    assert!(err.to_string().contains("before migration 2 (m2)"), "{err}");
    assert_eq!(applied_versions(&db), vec![1]);
    assert!(!db.lock().unwrap().tables.contains("users_col"));
}

#[tokio::test(start_paused = true)]
async fn a_pause_ends_once_the_session_holding_the_lock_is_done() {
    let db = db();
    blocked(&db, 2);
    db.lock().unwrap().blocker_named = true;
    let (recorded, sink) = recording();
    migrator(&db, waiting())
        .with_events(sink)
        .migrate()
        .await
        .unwrap();
    let retried = retries(&recorded);
    let events = recorded.lock().unwrap().clone();
    let freed: Vec<(Duration, Duration)> = (events.iter())
        .filter_map(|e| match &e.kind {
            EventKind::TableLockFreed {
                pause_left,
                wait,
                blocker,
                ..
            } => {
                assert_eq!(blocker.as_ref().and_then(|b| b.session_id), Some(4127));
                Some((*pause_left, *wait))
            }
            _ => None,
        })
        .collect();
    // Still held after the first attempt; done after the second: the second pause (at least
    // three timeouts) is cut short at the first look.
    assert_eq!(retried.len(), 2, "{events:?}");
    assert_eq!(freed.len(), 1, "{events:?}");
    let (pause_left, wait) = freed[0];
    assert!(
        pause_left >= retried[1].1 - Duration::from_millis(250),
        "{freed:?}"
    );
    // Blocked 4 s (two attempts of 2 s) of the time elapsed when the pause is cut short: the
    // early attempt may wait (elapsed - 16 s) / 3 at most, so that the application stays
    // blocked under a quarter of the time should it wait that long.
    let elapsed = 2 * Duration::from_secs(2) + retried[0].1 + (retried[1].1 - pause_left);
    let room = elapsed.saturating_sub(Duration::from_secs(16)) / 3;
    assert!(
        wait <= room + Duration::from_millis(1),
        "{freed:?} {room:?}"
    );
    assert!(wait < Duration::from_secs(2), "{freed:?}");
    let timeouts = db.lock().unwrap().lock_timeouts.clone();
    assert_eq!(timeouts.len(), 5, "{timeouts:?}");
    assert_eq!(timeouts[3], Some(wait), "the early attempt runs with it");
    assert_eq!(
        timeouts[4],
        Some(Duration::from_secs(2)),
        "the next step has its own"
    );
    assert!(db.lock().unwrap().tables.contains("users_col"));
}
