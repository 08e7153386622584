//! Errors keep their cause: behind a `CONNECTION_ERROR`, a `HISTORY_ERROR` or a lock error,
//! `std::error::Error::source()` is the driver's own error (sqlx's, the MongoDB driver's), so
//! a program can act on what the database said, not only print the message.

use std::error::Error as _;
use std::time::Duration;

use dirthara::{Code, Config, Locking, Migrator};

/// A project on SQLite with one migration, run without a lock unless told otherwise.
fn sqlite_project() -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    let migrations = dir.path().join("migrations");
    std::fs::create_dir(&migrations).unwrap();
    std::fs::write(
        migrations.join("1_users.up.sql"),
        "CREATE TABLE users (id INT)",
    )
    .unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    config.directories = vec![migrations];
    config.locking = Locking::Off;
    (dir, config)
}

/// A directory holding one migration, for a run that must get as far as connecting: a SQL
/// file, or for MongoDB a JSON command file.
fn one_migration(mongo: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    match mongo {
        false => std::fs::write(
            dir.path().join("1_users.up.sql"),
            "CREATE TABLE users (id INT)",
        ),
        true => std::fs::write(
            dir.path().join("1_users.up.json"),
            r#"[{"create": "users"}]"#,
        ),
    }
    .unwrap();
    dir
}

async fn sqlite(config: &Config, sql: &str) {
    use sqlx::{Connection as _, Executor as _};
    let url = format!("{}?mode=rwc", config.connection_url("default").unwrap());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    conn.execute(sql).await.unwrap();
    conn.close().await.unwrap();
}

/// The error's `source()`, as the driver error type `T`.
#[track_caller]
fn driver_error<T: std::error::Error + 'static>(error: &dirthara::Error) -> &T {
    let source = error
        .source()
        .unwrap_or_else(|| panic!("no source: {error}"));
    source
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("the source is not the driver's error: {source:?}"))
}

#[tokio::test]
async fn a_connection_error_keeps_sqlxs_error() {
    // Nothing listens on port 1.
    let migrations = one_migration(false);
    let mut config = Config::with_url("postgres://app@127.0.0.1:1/app");
    config.directories = vec![migrations.path().to_path_buf()];
    config.connect_timeout = Duration::from_millis(300);
    let error = Migrator::new(config).migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::ConnectionError, "{error}");
    let sqlx_error = driver_error::<sqlx::Error>(&error);
    assert!(matches!(sqlx_error, sqlx::Error::Io(_)), "{sqlx_error:?}");
}

#[tokio::test]
async fn a_connection_error_keeps_the_mongodb_drivers_error() {
    let migrations = one_migration(true);
    let mut config = Config::with_url("mongodb://127.0.0.1:1/app?directConnection=true");
    config.directories = vec![migrations.path().to_path_buf()];
    config.connect_timeout = Duration::from_millis(300);
    let error = Migrator::new(config).migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::ConnectionError, "{error}");
    driver_error::<mongodb::error::Error>(&error);
}

#[tokio::test]
async fn a_history_error_keeps_sqlxs_error() {
    let (_dir, config) = sqlite_project();
    Migrator::new(config.clone()).migrate().await.unwrap();
    // A history whose records cannot be read: a column dirthara reads is gone.
    sqlite(
        &config,
        "ALTER TABLE dirthara_migrations RENAME COLUMN checksum TO renamed",
    )
    .await;
    let error = Migrator::new(config).status().await.unwrap_err();
    assert_eq!(error.code(), Code::HistoryError, "{error}");
    let sqlx_error = driver_error::<sqlx::Error>(&error);
    assert!(
        matches!(sqlx_error, sqlx::Error::Database(_)),
        "{sqlx_error:?}"
    );
}

#[tokio::test]
async fn a_lock_error_keeps_sqlxs_error() {
    let (_dir, mut config) = sqlite_project();
    // A lease table dirthara cannot use: not one of its columns.
    sqlite(&config, "CREATE TABLE dirthara_migrations_lock (x INT)").await;
    config.locking = Locking::Lease;
    let error = Migrator::new(config).migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::MigrationLockFailed, "{error}");
    let sqlx_error = driver_error::<sqlx::Error>(&error);
    assert!(
        matches!(sqlx_error, sqlx::Error::Database(_)),
        "{sqlx_error:?}"
    );
}
