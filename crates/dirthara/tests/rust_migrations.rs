//! Migrations written in Rust, mixed with file migrations, on SQLite.

use dirthara::{Code, Config, Locking, Migrator, RollbackScope};
use dirthara::{Connection, RustMigration, StepError};

struct SeedUsers {
    revision: &'static str,
    fail: bool,
}

#[async_trait::async_trait]
impl RustMigration for SeedUsers {
    fn version(&self) -> i64 {
        2
    }
    fn name(&self) -> &str {
        "seed_users"
    }
    fn revision(&self) -> &str {
        self.revision
    }
    fn reversible(&self) -> bool {
        true
    }
    async fn up(&self, conn: Connection<'_>) -> Result<(), StepError> {
        let Connection::Sqlite(conn) = conn else {
            return Err("expected SQLite".into());
        };
        sqlx::query("INSERT INTO users (email) VALUES ('a@example.com'), ('b@example.com')")
            .execute(&mut *conn)
            .await?;
        if self.fail {
            return Err(Box::new(BadData { rows: 2 }));
        }
        Ok(())
    }
    async fn down(&self, conn: Connection<'_>) -> Result<(), StepError> {
        let Connection::Sqlite(conn) = conn else {
            return Err("expected SQLite".into());
        };
        sqlx::query("DELETE FROM users").execute(conn).await?;
        Ok(())
    }
}

/// The migration's own error type, which a caller gets back through `source()`.
#[derive(Debug)]
struct BadData {
    rows: u32,
}

impl std::fmt::Display for BadData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the backfill found bad data ({} rows)", self.rows)
    }
}

impl std::error::Error for BadData {}

fn project() -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    let migrations = dir.path().join("migrations");
    std::fs::create_dir(&migrations).unwrap();
    std::fs::write(
        migrations.join("1_users.up.sql"),
        "CREATE TABLE users (email TEXT NOT NULL)",
    )
    .unwrap();
    std::fs::write(migrations.join("1_users.down.sql"), "DROP TABLE users").unwrap();
    std::fs::write(
        migrations.join("3_index.up.sql"),
        "CREATE UNIQUE INDEX users_email ON users (email)",
    )
    .unwrap();
    std::fs::write(
        migrations.join("3_index.down.sql"),
        "DROP INDEX users_email",
    )
    .unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    config.directories = vec![migrations];
    config.locking = Locking::Off;
    (dir, config)
}

async fn count_users(config: &Config) -> i64 {
    use sqlx::Connection as _;
    let mut conn = sqlx::SqliteConnection::connect(config.connection_url("default").unwrap())
        .await
        .unwrap();
    sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn rust_and_file_migrations_run_in_one_ordered_set_and_roll_back() {
    let (_dir, config) = project();
    let seed = || SeedUsers {
        revision: "1",
        fail: false,
    };
    let migrator = Migrator::new(config.clone()).with_rust_migration(seed());
    let report = migrator.migrate().await.unwrap();
    let applied: Vec<(i64, &str)> = report
        .applied
        .iter()
        .map(|s| (s.version, s.name.as_str()))
        .collect();
    assert_eq!(applied, vec![(1, "users"), (2, "seed_users"), (3, "index")]);
    assert_eq!(count_users(&config).await, 2);

    let preview = migrator
        .preview(dirthara::Command::Rollback(RollbackScope::All))
        .await
        .unwrap();
    assert!(preview.steps[1]
        .sql
        .contains("Rust migration 2 seed_users (revision 1): down"));
    let report = migrator.rollback(RollbackScope::Steps(2)).await.unwrap();
    assert_eq!(
        report
            .reverted
            .iter()
            .map(|s| s.version)
            .collect::<Vec<_>>(),
        vec![3, 2]
    );
    assert_eq!(count_users(&config).await, 0);

    // Bumping the revision of an applied Rust migration is like editing an applied file.
    Migrator::new(config.clone())
        .with_rust_migration(seed())
        .migrate()
        .await
        .unwrap();
    let bumped = Migrator::new(config.clone()).with_rust_migration(SeedUsers {
        revision: "2",
        fail: false,
    });
    assert_eq!(
        bumped.migrate().await.unwrap_err().code(),
        Code::ChecksumMismatch
    );
}

#[tokio::test]
async fn a_failing_rust_migration_rolls_back_with_its_record() {
    let (_dir, config) = project();
    let migrator = Migrator::new(config.clone()).with_rust_migration(SeedUsers {
        revision: "1",
        fail: true,
    });
    let err = migrator.migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed);
    assert!(
        err.to_string().contains("the backfill found bad data"),
        "{err}"
    );
    assert_eq!(err.completed().len(), 1);
    // Its inserts were rolled back with it, and it is still pending.
    assert_eq!(count_users(&config).await, 0);
    let status = migrator.status().await.unwrap();
    assert_eq!(
        status.migrations[1].state,
        dirthara::MigrationState::Pending
    );
}

/// The error a Rust migration returned is kept whole, not turned into text: the run's error
/// (`MIGRATION_FAILED`) has what the step said as its `source()`, and that has the
/// migration's own error as its `source()`, to downcast to the type the migration returned.
#[tokio::test]
async fn a_rust_migrations_own_error_is_kept_as_the_errors_source() {
    use std::error::Error as _;
    let (_dir, config) = project();
    let migrator = Migrator::new(config).with_rust_migration(SeedUsers {
        revision: "1",
        fail: true,
    });
    let err = migrator.migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed);
    let step = err.source().expect("what the step said");
    assert!(step.is::<dirthara::DatabaseError>(), "{step:?}");
    let own = step.source().expect("the migration's own error");
    let bad = own
        .downcast_ref::<BadData>()
        .expect("the type the migration returned");
    assert_eq!(bad.rows, 2);
}

#[tokio::test]
async fn a_rust_migration_without_its_code_is_refused() {
    let (_dir, config) = project();
    Migrator::new(config.clone())
        .with_rust_migration(SeedUsers {
            revision: "1",
            fail: false,
        })
        .migrate()
        .await
        .unwrap();
    // A binary that no longer registers migration 2 sees it as missing, never re-runs it.
    let err = Migrator::new(config).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MissingMigration);
}

/// A Rust migration follows the rules of files: versions 0 ..= 2^63-1 (0 as sqlx and Diesel
/// allow), names of letters, digits, `.`, `_` and `-`; anything else is refused at load.
#[tokio::test]
async fn rust_migrations_take_the_versions_and_names_files_take() {
    struct Named(i64, &'static str);
    #[async_trait::async_trait]
    impl RustMigration for Named {
        fn version(&self) -> i64 {
            self.0
        }
        fn name(&self) -> &str {
            self.1
        }
        fn revision(&self) -> &str {
            "1"
        }
        async fn up(&self, _: Connection<'_>) -> Result<(), StepError> {
            Ok(())
        }
    }
    let (_dir, config) = project();
    let migrator = Migrator::new(config.clone())
        .with_rust_migration(Named(0, "setup.v1.7"))
        .with_rust_migration(Named(4, "after"));
    assert_eq!(migrator.load().unwrap().len(), 4);
    for (version, name, needle) in [
        (-1, "negative", "the version -1 is negative"),
        (5, "has space", "contains ` `"),
    ] {
        let error = Migrator::new(config.clone())
            .with_rust_migration(Named(version, name))
            .load()
            .unwrap_err();
        assert_eq!(error.code(), Code::InvalidMigration);
        assert!(error.to_string().contains(needle), "{error}");
    }
}

/// A migration of the Rust format given without its code cannot run: refused at load, before
/// any migration is applied, not half-way through the run.
#[tokio::test]
async fn a_rust_format_migration_given_without_code_is_refused_at_load() {
    let (_dir, config) = project();
    let mut codeless = dirthara::Migration::new(9, "codeless", "-- rust");
    codeless.format = dirthara::StepFormat::Rust;
    let migrator = Migrator::new(config.clone()).with_migrations([codeless]);
    let err = migrator.load().unwrap_err();
    assert_eq!(err.code(), Code::InvalidMigration);
    assert!(err.to_string().contains("with_rust_migration"), "{err}");
    let err = migrator.migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidMigration);
    let status = Migrator::new(config).status().await.unwrap();
    assert!(status
        .migrations
        .iter()
        .all(|m| m.state == dirthara::MigrationState::Pending));
}
