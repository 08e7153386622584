use super::*;
use crate::events::EventSink;
use crate::vocabulary::{Code, Outcome};
use std::sync::{Arc, Mutex};

fn counter_ids() -> [u8; 8] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes()
}

/// Feeds `emit`'s events through a real sink (so they are stamped as the engine's are).
fn record(emit: impl FnOnce(&EventSink)) -> Recorder {
    let recorder = Arc::new(Mutex::new(Recorder::new(SystemTime::now(), counter_ids)));
    let into = Arc::clone(&recorder);
    let sink = EventSink::new(move |event| into.lock().unwrap().record(event));
    emit(&sink);
    drop(sink);
    Arc::try_unwrap(recorder).unwrap().into_inner().unwrap()
}

fn started(version: i64) -> EventKind {
    EventKind::MigrationStarted {
        version,
        name: format!("m{version}"),
        direction: Direction::Up,
        connection: "main".into(),
    }
}

fn finished_event(version: i64) -> EventKind {
    EventKind::MigrationFinished {
        version,
        name: format!("m{version}"),
        direction: Direction::Up,
        duration: Duration::from_millis(5),
        reverses_nothing: false,
        repeatable: false,
    }
}

#[test]
fn migrations_and_the_lock_wait_hang_under_the_command_and_a_failed_step_is_an_error() {
    let mut recorder = record(|sink| {
        sink.emit(EventKind::LockWaiting {
            lock: "dirthara:migrations".into(),
            connection: "main".into(),
            holder: Some({
                let mut holder = crate::events::LockHolder::default();
                holder.session_id = Some(42);
                holder
            }),
            waited: Duration::ZERO,
        });
        sink.emit(EventKind::LockAcquired {
            lock: "dirthara:migrations".into(),
            connection: "main".into(),
            waited: Duration::from_millis(1500),
        });
        sink.emit(started(1));
        // MySQL: a step's record goes with the next step's marker, so it is finished
        // after the next one started.
        sink.emit(started(2));
        sink.emit(finished_event(1));
    });
    let root = recorder.finish(
        "migrate",
        SystemTime::now(),
        Some(("MIGRATION_FAILED", "boom")),
    );
    let names: Vec<_> = recorder.spans.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "dirthara.lock.wait",
            "dirthara.migration",
            "dirthara.migration"
        ]
    );
    assert!(recorder
        .spans
        .iter()
        .all(|s| s.parent == Some(root.span_id)));
    let wait = &recorder.spans[0];
    assert!(wait
        .attributes
        .contains(&("dirthara.lock.holder.session_id", Value::Int(42))));
    assert_eq!(
        wait.end.duration_since(wait.start).unwrap(),
        Duration::from_millis(1500)
    );
    assert_eq!(recorder.spans[1].error, None);
    assert_eq!(
        recorder.spans[2].error.as_deref(),
        Some("MIGRATION_FAILED: boom")
    );
    assert_eq!(root.error.as_deref(), Some("MIGRATION_FAILED: boom"));
    let counters = &recorder.counters;
    assert_eq!((counters.applied, counters.failed), (1, 1));
    assert_eq!(counters.lock_wait, Duration::from_millis(1500));
}

#[test]
fn each_fleet_target_is_a_span_of_its_own_holding_its_migrations() {
    let mut recorder = record(|sink| {
        let a = sink.for_target("tenant_a");
        let b = sink.for_target("tenant_b");
        a.emit(EventKind::TargetStarted { deferred: false });
        b.emit(EventKind::TargetStarted { deferred: false });
        a.emit(started(1));
        b.emit(started(1));
        b.emit(finished_event(1));
        a.emit(EventKind::TargetFinished {
            outcome: Outcome::Failed,
            applied: 0,
            reverted: 0,
            error: Some(Code::MigrationFailed),
            duration: Duration::from_millis(3),
        });
        b.emit(EventKind::TargetFinished {
            outcome: Outcome::Applied,
            applied: 1,
            reverted: 0,
            error: None,
            duration: Duration::from_millis(3),
        });
    });
    recorder.finish("migrate", SystemTime::now(), None);
    let target = |name: &str| {
        (recorder.spans.iter())
            .find(|s| {
                s.name == "dirthara.target"
                    && s.attributes
                        .contains(&("dirthara.target", Value::Text(name.into())))
            })
            .unwrap()
    };
    let (a, b) = (target("tenant_a"), target("tenant_b"));
    assert_eq!(a.error.as_deref(), Some("MIGRATION_FAILED"));
    let under = |span: &SpanRecord| {
        (recorder.spans.iter())
            .filter(|s| s.name == "dirthara.migration" && s.parent == Some(span.span_id))
            .map(|s| s.error.is_some())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        under(a),
        [true],
        "tenant_a's migration failed, under its span"
    );
    assert_eq!(under(b), [false]);
    assert_eq!(recorder.counters.targets.get("failed"), Some(&1));
    assert_eq!(recorder.counters.targets.get("applied"), Some(&1));
    assert_eq!(
        (recorder.counters.applied, recorder.counters.failed),
        (1, 1)
    );
}
