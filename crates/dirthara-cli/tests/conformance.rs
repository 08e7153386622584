//! One conformance suite, run through the library against every backend: SQLite (unlocked),
//! PostgreSQL and MariaDB (session lock). Each backend must give the same answers.

mod servers;

use dirthara::{Code, Command, Config, ErrorKind, Locking, Migrator, Resolution, RollbackScope};
use servers::{Migrations, Server, TestDb};

fn migrator(url: &str, migrations: &Migrations, locking: Locking) -> Migrator {
    let mut config = Config::with_url(url);
    config.directories = vec![migrations.path().to_path_buf()];
    config.locking = locking;
    Migrator::new(config)
}

fn versions(steps: &[dirthara::report::StepReport]) -> Vec<i64> {
    steps.iter().map(|s| s.version).collect()
}

/// What differs between backends, as far as the suite is concerned.
struct Target {
    url: String,
    locking: Locking,
    /// A failed step leaves nothing behind (transactional DDL).
    transactional_ddl: bool,
}

async fn conformance(target: Target) {
    let url = target.url.as_str();
    let m = Migrations::new();
    m.add(1, "a", "CREATE TABLE t_a (id INT)", Some("DROP TABLE t_a"));
    m.add(2, "b", "CREATE TABLE t_b (id INT)", Some("DROP TABLE t_b"));
    m.add(3, "c", "CREATE TABLE t_c (id INT)", Some("DROP TABLE t_c"));
    let run = || migrator(url, &m, target.locking);

    // status and preview on an empty database create nothing and take no lock.
    let status = run().status().await.unwrap();
    assert_eq!(status.migrations.len(), 3);
    assert!(status
        .migrations
        .iter()
        .all(|s| s.state == dirthara::plan::MigrationState::Pending));
    let preview = run().preview(Command::Migrate).await.unwrap();
    assert_eq!(versions_of_preview(&preview), vec![1, 2, 3]);
    assert_eq!(preview.steps[0].sql, "CREATE TABLE t_a (id INT)");

    // migrate: one batch; then nothing to do.
    let report = run().migrate().await.unwrap();
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![1, 2, 3], Some(1))
    );
    assert!(run().migrate().await.unwrap().applied.is_empty());

    // a second batch, rolled back on its own.
    m.add(4, "d", "CREATE TABLE t_d (id INT)", Some("DROP TABLE t_d"));
    let report = run().migrate().await.unwrap();
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![4], Some(2))
    );
    let report = run().rollback(RollbackScope::LastBatch).await.unwrap();
    assert_eq!(versions(&report.reverted), vec![4]);
    run().migrate().await.unwrap();

    // steps, to, down, to 0, back up.
    assert_eq!(
        versions(
            &run()
                .rollback(RollbackScope::Steps(2))
                .await
                .unwrap()
                .reverted
        ),
        vec![4, 3]
    );
    assert_eq!(
        versions(&run().migrate_to(3).await.unwrap().applied),
        vec![3]
    );
    assert_eq!(
        versions(&run().rollback(RollbackScope::To(1)).await.unwrap().reverted),
        vec![3, 2]
    );
    assert_eq!(
        versions(&run().migrate_to(0).await.unwrap().reverted),
        vec![1]
    );
    assert_eq!(
        versions(&run().migrate().await.unwrap().applied),
        vec![1, 2, 3, 4]
    );

    // refresh: everything down then up, under one lock.
    let report = run().refresh().await.unwrap();
    assert_eq!(versions(&report.reverted), vec![4, 3, 2, 1]);
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![1, 2, 3, 4], Some(1))
    );

    // planning refusals change nothing.
    let err = run().migrate_to(99).await.unwrap_err();
    assert_eq!(err.code(), Code::UnknownVersion);
    m.add(5, "irreversible", "CREATE TABLE t_e (id INT)", None);
    run().migrate().await.unwrap();
    let err = run().rollback(RollbackScope::Steps(1)).await.unwrap_err();
    assert_eq!(err.code(), Code::IrreversibleMigration);

    // a changed file is refused until accepted.
    std::fs::write(m.path().join("2_b.up.sql"), "CREATE TABLE t_b (id BIGINT)").unwrap();
    let err = run().migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::ChecksumMismatch);
    run().resolve(2, Resolution::AcceptChecksum).await.unwrap();
    run().migrate().await.unwrap();

    // fresh drops what is not ours too, and keeps working after the history is gone.
    m.add(6, "stray", "CREATE TABLE stray (id INT)", None);
    run().migrate().await.unwrap();
    std::fs::remove_file(m.path().join("6_stray.sql")).unwrap();
    assert_eq!(
        run().migrate().await.unwrap_err().code(),
        Code::MissingMigration
    );
    let report = run().fresh().await.unwrap();
    assert!(
        report.dropped.contains(&"stray".to_string()),
        "{:?}",
        report.dropped
    );
    assert_eq!(versions(&report.applied), vec![1, 2, 3, 4, 5]);

    // a failing migration in the middle.
    m.add(7, "ok", "CREATE TABLE t_g (id INT)", Some("DROP TABLE t_g"));
    m.add(
        8,
        "broken",
        "CREATE TABLE t_h (id INT);\nSELECT * FROM no_such_table;",
        Some("DROP TABLE t_h"),
    );
    m.add(
        9,
        "later",
        "CREATE TABLE t_i (id INT)",
        Some("DROP TABLE t_i"),
    );
    let err = run().migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed);
    assert_eq!(versions(err.completed()), vec![7]);
    let status = run().status().await.unwrap();
    let state = |v: i64| {
        status
            .migrations
            .iter()
            .find(|s| s.version == v)
            .unwrap()
            .state
    };
    use dirthara::plan::MigrationState::*;
    assert_eq!((state(7), state(9)), (Applied, Pending));
    if target.transactional_ddl {
        assert!(matches!(
            err.kind(),
            ErrorKind::MigrationFailed {
                left_dirty: false,
                ..
            }
        ));
        assert_eq!(state(8), Pending);
    } else {
        // MySQL committed the CREATE TABLE before the failure: the history says so.
        assert!(matches!(
            err.kind(),
            ErrorKind::MigrationFailed {
                left_dirty: true,
                ..
            }
        ));
        assert_eq!(state(8), Dirty);
        assert_eq!(
            run().migrate().await.unwrap_err().code(),
            Code::DirtyMigration
        );
        // The operator drops the half-made table and records the rollback.
        drop_table(url, "t_h").await;
        let report = run().resolve(8, Resolution::RolledBack).await.unwrap();
        assert_eq!(report.recorded.len(), 1);
    }
    std::fs::write(
        m.path().join("8_broken.up.sql"),
        "CREATE TABLE t_h (id INT)",
    )
    .unwrap();
    assert_eq!(
        versions(&run().migrate().await.unwrap().applied),
        vec![8, 9]
    );

    // baseline on a fresh history adopts without running.
    let report = run().fresh().await.unwrap();
    assert_eq!(report.applied.len(), 8);
    let other = Migrations::new();
    other.add(1, "a", "CREATE TABLE t_a (id INT)", None);
    other.add(2, "b", "CREATE TABLE t_b2 (id INT)", None);
    let adopt = |history_table: &str| {
        let mut config = Config::with_url(url);
        config.directories = vec![other.path().to_path_buf()];
        config.locking = target.locking;
        config.history_table = history_table.to_string();
        Migrator::new(config)
    };
    let report = adopt("adopted_history").baseline(1).await.unwrap();
    assert_eq!(versions(&report.recorded), vec![1]);
    assert_eq!(
        versions(&adopt("adopted_history").migrate().await.unwrap().applied),
        vec![2]
    );
}

fn versions_of_preview(preview: &dirthara::Preview) -> Vec<i64> {
    preview.steps.iter().map(|s| s.version).collect()
}

async fn drop_table(url: &str, table: &str) {
    use sqlx::{Connection, Executor};
    let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
    c.execute(format!("DROP TABLE {table}").as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn conformance_sqlite_unlocked() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("c.db").display());
    conformance(Target {
        url,
        locking: Locking::Off,
        transactional_ddl: true,
    })
    .await;
}

#[tokio::test]
async fn conformance_postgres_session_lock() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    conformance(Target {
        url: db.url.clone(),
        locking: Locking::Auto,
        transactional_ddl: true,
    })
    .await;
}

#[tokio::test]
async fn conformance_mysql_session_lock() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    conformance(Target {
        url: db.url.clone(),
        locking: Locking::Auto,
        transactional_ddl: false,
    })
    .await;
}

#[tokio::test]
async fn conformance_sqlite_lease() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("c.db").display());
    conformance(Target {
        url,
        locking: Locking::Lease,
        transactional_ddl: true,
    })
    .await;
}

#[tokio::test]
async fn conformance_postgres_lease() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    conformance(Target {
        url: db.url.clone(),
        locking: Locking::Lease,
        transactional_ddl: true,
    })
    .await;
}

#[tokio::test]
async fn conformance_mysql_lease() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    conformance(Target {
        url: db.url.clone(),
        locking: Locking::Lease,
        transactional_ddl: false,
    })
    .await;
}
