//! Hostile input through the library: migrations given in code face the loader's rules (a
//! NUL byte is refused before any database is touched), and SQLite runs a big file whole,
//! statement by statement, with the guarantees of a small one.

use std::path::Path;
use std::time::Duration;

use dirthara::{Code, Config, ErrorKind, Locking, Migration, Migrator};

fn sqlite_project() -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    let migrations = dir.path().join("migrations");
    std::fs::create_dir(&migrations).unwrap();
    let mut config = Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    config.directories = vec![migrations];
    config.locking = Locking::Off;
    (dir, config)
}

/// Regression (issue 22): `SELECT 1;\0` given in code looped for ever in sqlx on SQLite.
/// Refused by the load step instead, naming every such migration, before the database file
/// is even created.
#[tokio::test]
async fn a_nul_byte_in_a_migration_given_in_code_is_refused_naming_the_migration() {
    let (dir, mut config) = sqlite_project();
    config.directories.clear();
    let migrator = Migrator::new(config).with_migrations([
        Migration::new(1, "up_nul", "SELECT 1;\0"),
        Migration::new(2, "fine", "SELECT 1;"),
        Migration::new(3, "down_nul", "SELECT 1;").with_down("SELECT 1;\n\0"),
    ]);
    let error = migrator.load().unwrap_err();
    assert_eq!(error.code(), Code::InvalidMigration);
    let ErrorKind::InvalidMigration { problems } = error.kind() else {
        panic!("{error:?}");
    };
    let found: Vec<(String, &str)> = problems
        .iter()
        .map(|p| (p.file.display().to_string(), p.reason.as_str()))
        .collect();
    assert_eq!(found.len(), 2, "{error}");
    assert_eq!(found[0].0, "1_up_nul");
    assert!(
        found[0]
            .1
            .starts_with("its up step holds a NUL byte at byte offset 9 (line 1)"),
        "{error}"
    );
    assert_eq!(found[1].0, "3_down_nul");
    assert!(
        found[1]
            .1
            .starts_with("its down step holds a NUL byte at byte offset 10 (line 2)"),
        "{error}"
    );

    // A command refuses it the same way, at once (it used to spin in the driver for ever).
    let run = tokio::time::timeout(Duration::from_secs(60), migrator.migrate()).await;
    let error = run.expect("the run ended").unwrap_err();
    assert_eq!(error.code(), Code::InvalidMigration, "{error}");
    assert!(!dir.path().join("app.db").exists(), "nothing was touched");
}

#[tokio::test]
async fn a_nul_byte_in_a_migration_name_given_in_code_is_refused() {
    let (_dir, mut config) = sqlite_project();
    config.directories.clear();
    let migrator = Migrator::new(config).with_migrations([Migration::new(1, "a\0b", "SELECT 1;")]);
    let error = migrator.load().unwrap_err();
    assert_eq!(error.code(), Code::InvalidMigration);
    assert!(
        error
            .to_string()
            .contains("its name holds a NUL byte at byte offset 1"),
        "{error}"
    );
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

async fn sqlite(config: &Config) -> sqlx::SqliteConnection {
    use sqlx::Connection as _;
    sqlx::SqliteConnection::connect(config.connection_url("default").unwrap())
        .await
        .unwrap()
}

async fn scalar(conn: &mut sqlx::SqliteConnection, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(conn).await.unwrap()
}

/// About 4 MB of SQL holding what a tokenizer must not split (`;` in strings, comments and
/// trigger bodies, bracketed names, multi-byte text at any offset, statements longer than
/// what SQLite is sent at once) among plain INSERT lines; returns the text and its rows.
fn big_file() -> (String, i64) {
    let mut sql = String::from(
        "CREATE TABLE [big rows] (id INTEGER PRIMARY KEY, payload TEXT NOT NULL);\n\
         CREATE TABLE counter (n INTEGER NOT NULL);\nINSERT INTO counter VALUES (0);\n\
         /* a trigger: its body's `;` end no statement */\n\
         CREATE TRIGGER counted AFTER INSERT ON [big rows] BEGIN\n\
           UPDATE counter SET n = n + CASE WHEN NEW.id > 0 THEN 1 ELSE 0 END;\n\
         END;\n",
    );
    let mut rows = 0;
    while sql.len() < 4 * 1024 * 1024 {
        rows += 1;
        match rows % 1000 {
            // One statement far longer than a window, over many lines.
            500 => {
                sql.push_str("INSERT INTO [big rows] (id, payload) VALUES\n");
                for i in 0..2000 {
                    if i > 0 {
                        sql.push_str(",\n");
                        rows += 1;
                    }
                    sql.push_str(&format!("  ({rows}, 'long; é {i}')"));
                }
                sql.push_str(";\n");
            }
            7 => sql.push_str(&format!(
                "-- a comment; with semicolons;\nINSERT INTO [big rows] VALUES ({rows}, 'é;''x''-- /*');\n"
            )),
            _ => sql.push_str(&format!(
                "INSERT INTO [big rows] (id, payload) VALUES ({rows}, 'row {rows}; ü');\n"
            )),
        }
    }
    (sql, rows)
}

/// Regression (issue 22): 2 MB of INSERT lines took 2.7 s and 138 MB on SQLite, 8 MB 31 s
/// (the time is for `bench/sqlite_big_file.sh`; this proves the result). A 4 MB file applies
/// whole, with its record.
#[tokio::test]
async fn a_big_sqlite_file_applies_whole_with_its_record() {
    let (_dir, config) = sqlite_project();
    let (sql, rows) = big_file();
    write(&config.directories[0], "1_big.up.sql", &sql);
    let report = Migrator::new(config.clone()).migrate().await.unwrap();
    assert_eq!(report.applied.len(), 1);
    let mut conn = sqlite(&config).await;
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) FROM [big rows]").await,
        rows
    );
    assert_eq!(scalar(&mut conn, "SELECT n FROM counter").await, rows);
    let semicolons = "SELECT count(*) FROM [big rows] WHERE payload LIKE '%;%'";
    assert_eq!(scalar(&mut conn, semicolons).await, rows);
    let recorded =
        "SELECT count(*) FROM dirthara_migrations WHERE version = 1 AND state = 'applied'";
    assert_eq!(scalar(&mut conn, recorded).await, 1);
}

/// A statement that fails deep in a big transactional file: the error names its line (the
/// line of its code, after its comments), and neither the file's changes nor its record are
/// left behind.
#[tokio::test]
async fn a_failure_deep_in_a_big_sqlite_file_names_its_line_and_leaves_nothing() {
    let (_dir, config) = sqlite_project();
    let (mut sql, _) = big_file();
    sql.push_str("/* the bad one;\n is below */\n-- here:\nINSERT INTO missing VALUES (1);\n");
    let line = sql.lines().count();
    sql.push_str("INSERT INTO [big rows] VALUES (-1, 'never');\n");
    write(&config.directories[0], "1_big.up.sql", &sql);
    let error = Migrator::new(config.clone()).migrate().await.unwrap_err();
    let ErrorKind::MigrationFailed {
        error, left_dirty, ..
    } = error.kind()
    else {
        panic!("{error}");
    };
    assert!(error.message.contains("no such table: missing"), "{error}");
    assert_eq!(error.line, Some(line), "{error}");
    assert!(!left_dirty);
    let mut conn = sqlite(&config).await;
    let tables = "SELECT count(*) FROM sqlite_master WHERE name IN ('big rows', 'counter')";
    assert_eq!(
        scalar(&mut conn, tables).await,
        0,
        "the step was rolled back"
    );
    let history = "SELECT count(*) FROM dirthara_migrations";
    assert_eq!(
        scalar(&mut conn, history).await,
        0,
        "and its record with it"
    );
}

/// A step that cannot run in a transaction runs statement by statement as before: what ran
/// before the failing statement stays, the migration is left dirty, and the line is named.
#[tokio::test]
async fn a_failure_in_a_no_transaction_sqlite_file_names_its_line() {
    let (_dir, config) = sqlite_project();
    let sql = "-- dirthara:no-transaction\nCREATE TABLE kept (id INT);\n\n\
               INSERT INTO kept VALUES (1);\nINSERT INTO\n  missing VALUES (1);\n";
    write(&config.directories[0], "1_loose.up.sql", sql);
    let error = Migrator::new(config.clone()).migrate().await.unwrap_err();
    let ErrorKind::MigrationFailed {
        error, left_dirty, ..
    } = error.kind()
    else {
        panic!("{error}");
    };
    assert_eq!(error.line, Some(5), "{error}");
    assert!(left_dirty);
    let mut conn = sqlite(&config).await;
    assert_eq!(scalar(&mut conn, "SELECT count(*) FROM kept").await, 1);
}

/// SQLite takes `end` as a column name, so in this trigger the tokenizer ends the statement
/// at the first `;` of its body. Sent with what follows, SQLite reads it whole; here it is
/// the last statement of a batch, where the driver must notice and send on.
#[tokio::test]
async fn a_statement_the_tokenizer_ends_early_still_runs_whole_on_sqlite() {
    let (_dir, config) = sqlite_project();
    let mut sql = String::from("CREATE TABLE x (a INT);\nCREATE TABLE y (end INT);\n");
    for _ in 0..29 {
        sql.push_str("INSERT INTO y VALUES (0);\n");
    }
    sql.push_str(
        "CREATE TRIGGER t AFTER INSERT ON x BEGIN\n  UPDATE y SET end = end + 1;\n  \
         UPDATE y SET end = end + 1;\nEND;\nINSERT INTO x VALUES (1);\n",
    );
    write(&config.directories[0], "1_trigger.up.sql", &sql);
    Migrator::new(config.clone()).migrate().await.unwrap();
    let mut conn = sqlite(&config).await;
    assert_eq!(scalar(&mut conn, "SELECT sum(end) FROM y").await, 2 * 29);
}
