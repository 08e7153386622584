//! Migrations compiled into the binary with `embed_migrations!` run like files on disk.

use dirthara::{Config, Locking, Migrator};

#[tokio::test]
async fn embedded_migrations_migrate_a_database_without_the_files() {
    let migrations = dirthara::embed_migrations!("tests/embedded");
    assert_eq!(
        migrations
            .iter()
            .map(|m| (m.version, m.name.as_str(), m.repeatable))
            .collect::<Vec<_>>(),
        vec![
            (1, "create_notes", false),
            (2, "first_note", false),
            (0, "note_count", true)
        ]
    );
    assert_eq!(
        migrations[0].checksum(),
        dirthara::checksum(migrations[0].up())
    );
    assert!(
        migrations[1].down.is_none(),
        "a lone .sql file is irreversible"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("e.db").display()));
    config.directories.clear(); // nothing is read from disk
    config.locking = Locking::Off;
    let migrator = Migrator::new(config).with_migrations(migrations);
    let report = migrator.migrate().await.unwrap();
    let applied: Vec<(&str, bool)> = (report.applied.iter())
        .map(|s| (s.name.as_str(), s.repeatable))
        .collect();
    // The repeatable after the versioned ones, and only once while it is unchanged.
    assert_eq!(
        applied,
        [
            ("create_notes", false),
            ("first_note", false),
            ("note_count", true)
        ]
    );
    assert!(migrator.migrate().await.unwrap().applied.is_empty());
    let status = migrator.status().await.unwrap();
    assert_eq!(status.migrations.len(), 2);
    assert_eq!(
        status.repeatables[0].state,
        dirthara::RepeatableState::Applied
    );
}

/// An embedded migration keeps the layout of its directory, so the advice for it is that
/// layout's: a Diesel folder's `down.sql`, never `up.down.sql`.
#[tokio::test]
async fn an_embedded_migration_is_advised_in_its_directorys_layout() {
    let migrations = dirthara::embed_migrations!("tests/embedded-diesel");
    assert_eq!(
        migrations[0].layout.map(|l| l.layout),
        Some(dirthara::Layout::Diesel)
    );
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("e.db").display()));
    config.directories.clear();
    config.locking = Locking::Off;
    let migrator = Migrator::new(config).with_migrations(migrations);
    migrator.migrate().await.unwrap();
    let error = migrator
        .rollback(dirthara::RollbackScope::LastBatch)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "Add `tests/embedded-diesel/2024-01-01-000001_create_notes/down.sql` beside its `up.sql`"
        ),
        "{error}"
    );
}

/// goose's `ENVSUB ON` regions travel with an embedded migration and are filled from the
/// environment at run time, not at compile time: here the variable is unset and its default
/// applies (without the regions, SQLite would be sent `${…}` and refuse it).
#[tokio::test]
async fn an_embedded_goose_envsub_region_is_filled_at_run_time() {
    let migrations = dirthara::embed_migrations!("tests/embedded-goose");
    assert_eq!(
        migrations[0]
            .source_of(dirthara::Direction::Up)
            .envsub
            .len(),
        1
    );
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("e.db").display()));
    config.directories.clear();
    config.locking = Locking::Off;
    let migrator = Migrator::new(config).with_migrations(migrations);
    assert_eq!(migrator.migrate().await.unwrap().applied.len(), 1);
    // The down step drops the table the default named.
    let scope = dirthara::RollbackScope::LastBatch;
    assert_eq!(migrator.rollback(scope).await.unwrap().reverted.len(), 1);
}

/// An embedded baseline (`B<V>__`, written by `squash`) builds a new database as one on disk
/// does: in one step, then the migrations after it.
#[tokio::test]
async fn an_embedded_baseline_builds_a_new_database() {
    let migrations = dirthara::embed_migrations!("tests/embedded-squashed");
    let shown: Vec<(i64, &str, Option<Vec<i64>>)> = (migrations.iter())
        .map(|m| (m.version, m.name.as_str(), m.squashes.clone()))
        .collect();
    assert_eq!(shown, [(3, "tags", None), (2, "squash", Some(vec![1, 2]))]);
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("e.db").display()));
    config.directories.clear();
    config.locking = Locking::Off;
    let migrator = Migrator::new(config).with_migrations(migrations);
    let report = migrator.migrate().await.unwrap();
    let applied: Vec<(i64, &str)> = (report.applied.iter())
        .map(|s| (s.version, s.name.as_str()))
        .collect();
    assert_eq!(applied, [(2, "squash"), (3, "tags")]);
    let status = migrator.status().await.unwrap();
    assert_eq!(
        status.migrations[0].squashes.as_deref(),
        Some("1–2, 2 migrations")
    );
}
