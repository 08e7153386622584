//! One conformance suite, run through the library against every backend: SQLite (unlocked),
//! PostgreSQL and MariaDB (session lock). Each backend must give the same answers.

mod support;

use dirthara::{Code, Command, Config, ErrorKind, Locking, Migrator, Resolution, RollbackScope};
use support::servers::{mongo_client, Server, TestDb};
use support::{scratch_dir, Migrations};

fn migrator(url: &str, migrations: &Migrations, locking: Locking) -> Migrator {
    let mut config = Config::with_url(url);
    config.directories = vec![migrations.path().to_path_buf()];
    config.locking = locking;
    Migrator::new(config)
}

fn versions(steps: &[dirthara::StepReport]) -> Vec<i64> {
    steps.iter().map(|s| s.version).collect()
}

/// What differs between backends, as far as the suite is concerned.
struct Target {
    url: String,
    locking: Locking,
    /// A failed step leaves nothing behind (transactional DDL).
    transactional_ddl: bool,
    flavor: Flavor,
}

/// How migrations are written for the backend: SQL files or MongoDB JSON commands.
#[derive(Clone, Copy, PartialEq)]
enum Flavor {
    Sql,
    Json,
}

impl Flavor {
    fn ext(self) -> &'static str {
        match self {
            Flavor::Sql => "sql",
            Flavor::Json => "json",
        }
    }
    fn create(self, t: &str) -> String {
        match self {
            Flavor::Sql => format!("CREATE TABLE {t} (id INT)"),
            Flavor::Json => format!(r#"[{{"create": "{t}"}}]"#),
        }
    }
    fn create_changed(self, t: &str) -> String {
        match self {
            Flavor::Sql => format!("CREATE TABLE {t} (id BIGINT)"),
            Flavor::Json => format!(r#"[{{"create": "{t}", "capped": false}}]"#),
        }
    }
    fn drop(self, t: &str) -> String {
        match self {
            Flavor::Sql => format!("DROP TABLE {t}"),
            Flavor::Json => format!(r#"[{{"drop": "{t}"}}]"#),
        }
    }
    /// Creates `t`, then fails.
    fn broken(self, t: &str) -> String {
        match self {
            Flavor::Sql => format!("CREATE TABLE {t} (id INT);\nSELECT * FROM no_such_table;"),
            Flavor::Json => format!(
                r#"[{{"create": "{t}"}}, {{"insert": "{t}", "documents": [{{"_id": 1}}, {{"_id": 1}}]}}]"#
            ),
        }
    }
}

async fn conformance(target: Target) {
    let url = target.url.as_str();
    let f = target.flavor;
    let m = Migrations::new();
    let add = |v: i64, name: &str, up: String, down: Option<String>| {
        m.add_as(f.ext(), v, name, &up, down.as_deref());
    };
    add(1, "a", f.create("t_a"), Some(f.drop("t_a")));
    add(2, "b", f.create("t_b"), Some(f.drop("t_b")));
    add(3, "c", f.create("t_c"), Some(f.drop("t_c")));
    let run = || migrator(url, &m, target.locking);

    // status and preview on an empty database create nothing and take no lock.
    let status = run().status().await.unwrap();
    assert_eq!(status.migrations.len(), 3);
    assert!(status
        .migrations
        .iter()
        .all(|s| s.state == dirthara::MigrationState::Pending));
    let preview = run().preview(Command::Migrate).await.unwrap();
    assert_eq!(versions_of_preview(&preview), vec![1, 2, 3]);
    assert_eq!(preview.steps[0].sql, f.create("t_a"));

    // migrate: one batch; then nothing to do.
    let report = run().migrate().await.unwrap();
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![1, 2, 3], Some(1))
    );
    assert!(run().migrate().await.unwrap().applied.is_empty());

    // a second batch, rolled back on its own.
    add(4, "d", f.create("t_d"), Some(f.drop("t_d")));
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
    add(5, "irreversible", f.create("t_e"), None);
    run().migrate().await.unwrap();
    let err = run().rollback(RollbackScope::Steps(1)).await.unwrap_err();
    assert_eq!(err.code(), Code::IrreversibleMigration);

    // a changed file is refused until accepted.
    std::fs::write(
        m.path().join(format!("2_b.up.{}", f.ext())),
        f.create_changed("t_b"),
    )
    .unwrap();
    let err = run().migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::ChecksumMismatch);
    run().resolve(2, Resolution::AcceptChecksum).await.unwrap();
    run().migrate().await.unwrap();

    // fresh drops what is not ours too, and keeps working after the history is gone.
    add(6, "stray", f.create("stray"), None);
    run().migrate().await.unwrap();
    std::fs::remove_file(m.path().join(format!("6_stray.{}", f.ext()))).unwrap();
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
    add(7, "ok", f.create("t_g"), Some(f.drop("t_g")));
    add(8, "broken", f.broken("t_h"), Some(f.drop("t_h")));
    add(9, "later", f.create("t_i"), Some(f.drop("t_i")));
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
    use dirthara::MigrationState::*;
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
        // MySQL (and MongoDB) kept the created table before the failure: the history says so.
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
        drop_table(url, f, "t_h").await;
        let report = run().resolve(8, Resolution::RolledBack).await.unwrap();
        assert_eq!(report.recorded.len(), 1);
    }
    std::fs::write(
        m.path().join(format!("8_broken.up.{}", f.ext())),
        f.create("t_h"),
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
    other.add_as(f.ext(), 1, "a", &f.create("t_a"), None);
    other.add_as(f.ext(), 2, "b", &f.create("t_b2"), None);
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

/// What an operator does by hand before `resolve --rolled-back`.
async fn drop_table(url: &str, flavor: Flavor, table: &str) {
    use sqlx::{Connection, Executor};
    if flavor == Flavor::Json {
        let client = mongo_client(url).await.unwrap();
        let db = client.default_database().unwrap();
        db.collection::<mongodb::bson::Document>(table)
            .drop()
            .await
            .unwrap();
        return;
    }
    let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
    c.execute(format!("DROP TABLE {table}").as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn conformance_sqlite_unlocked() {
    let dir = scratch_dir();
    let url = format!("sqlite:{}", dir.path().join("c.db").display());
    conformance(Target {
        url,
        locking: Locking::Off,
        transactional_ddl: true,
        flavor: Flavor::Sql,
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
        flavor: Flavor::Sql,
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
        flavor: Flavor::Sql,
    })
    .await;
}

#[tokio::test]
async fn conformance_sqlite_lease() {
    let dir = scratch_dir();
    let url = format!("sqlite:{}", dir.path().join("c.db").display());
    conformance(Target {
        url,
        locking: Locking::Lease,
        transactional_ddl: true,
        flavor: Flavor::Sql,
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
        flavor: Flavor::Sql,
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
        flavor: Flavor::Sql,
    })
    .await;
}

#[tokio::test]
async fn conformance_mongodb_lease() {
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    conformance(Target {
        url: db.url.clone(),
        // `true` means the native strategy, which on MongoDB is the lease.
        locking: Locking::Auto,
        transactional_ddl: false,
        flavor: Flavor::Json,
    })
    .await;
}
