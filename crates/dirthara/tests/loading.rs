//! `Migrator::load` on real directories: every bad file in one error, skipped look-alikes as
//! `SKIPPED_FILE` warnings.

use std::sync::{Arc, Mutex};

use dirthara::{Code, ErrorKind, Event, EventKind, EventSink, Migrator};

fn migrator(dir: &std::path::Path) -> (Migrator, Arc<Mutex<Vec<Event>>>) {
    let mut config = dirthara::Config::with_url("sqlite:unused.db");
    config.directories = vec![dir.to_path_buf()];
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let sink = EventSink::new(move |e| seen.lock().unwrap().push(e.clone()));
    (Migrator::new(config).with_events(sink), events)
}

#[test]
fn skipped_look_alikes_become_skipped_file_warnings() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("1_a.up.sql"), "SELECT 1;").unwrap();
    std::fs::write(dir.path().join("2_b.up.sql.orig"), "SELECT 1;").unwrap();
    let (migrator, events) = migrator(dir.path());
    assert_eq!(migrator.load().unwrap().len(), 1);
    let warnings: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Warning(w) => Some(w.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].code, Code::SkippedFile);
    assert_eq!(warnings[0].code.as_str(), "SKIPPED_FILE");
    assert!(warnings[0]
        .message
        .contains("2_b.up.sql.orig was not loaded"));
}

#[test]
fn every_bad_file_is_in_one_invalid_migration_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("1_a.up.sql"), "").unwrap();
    std::fs::write(dir.path().join("b.sql"), "SELECT 1;").unwrap();
    let (migrator, _) = migrator(dir.path());
    let err = migrator.load().unwrap_err();
    assert_eq!(err.code(), Code::InvalidMigration);
    let ErrorKind::InvalidMigration { problems } = err.kind() else {
        panic!("{err:?}")
    };
    let files: Vec<_> = problems
        .iter()
        .map(|p| p.file.file_name().unwrap())
        .collect();
    assert_eq!(files, ["b.sql", "1_a.up.sql"]);
    let message = err.to_string();
    assert!(
        message.contains("\n  ") && message.contains("b.sql: the name does not parse"),
        "{message}"
    );
}
