//! Knowing what a migration does before it runs, on the real servers: a statement that would
//! block the application while it rewrites (or scans, or indexes) a table larger than
//! `blocking_table_size` is refused before anything runs (`BLOCKING_DDL`), with the table's
//! size from the live catalog; on a smaller table it runs, said as a warning; a file's
//! `-- dirthara:allow-blocking <reason>` or `--allow-blocking` lets the big one run.
//!
//! The tables here are small (tens of thousands of rows) and the limit is lowered to match:
//! the 3-million-row case, with a client reading throughout, is `bench/stall.sh`'s.

mod support;

use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

/// `big` of `rows` rows (about 40 bytes each), and `small` of 10, analysed so the catalog
/// knows their rows.
async fn tables(db: &TestDb, rows: u64) {
    match db.server {
        Server::Postgres => {
            db.execute(&format!(
                "CREATE TABLE big (id int PRIMARY KEY, n int, note text);\
                 INSERT INTO big SELECT i, i, 'row ' || i FROM generate_series(1, {rows}) i;\
                 CREATE TABLE small (id int PRIMARY KEY, n int);\
                 INSERT INTO small SELECT i, i FROM generate_series(1, 10) i;\
                 ANALYZE big; ANALYZE small;"
            ))
            .await
        }
        _ => {
            // ANALYZE reads every page (about 300), not InnoDB's default sample of 20, whose
            // row estimate on Oracle MySQL ranges from half to one and a half times the truth.
            db.execute(
                "CREATE TABLE big (id INT PRIMARY KEY, n INT, note VARCHAR(40)) \
                 STATS_SAMPLE_PAGES = 1000",
            )
            .await;
            // Digits crossed five times: 100,000 numbers, no recursion limit to meet.
            db.execute(&format!(
                "INSERT INTO big WITH d AS (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 \
                 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 \
                 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) \
                 SELECT i, i, CONCAT('row ', i) FROM (SELECT a.n + 10 * b.n + 100 * c.n \
                 + 1000 * e.n + 10000 * f.n + 1 AS i FROM d a, d b, d c, d e, d f) x \
                 WHERE i <= {rows}"
            ))
            .await;
            db.execute("CREATE TABLE small (id INT PRIMARY KEY, n INT)")
                .await;
            db.execute("INSERT INTO small VALUES (1, 1), (2, 2)").await;
            db.execute("ANALYZE TABLE big, small").await;
        }
    }
}

/// What the column `n` of `table` is now (its type), as the catalog says.
async fn type_of_n(db: &TestDb, table: &str) -> String {
    let sql = match db.server {
        Server::Postgres => format!(
            "SELECT data_type::text FROM information_schema.columns \
             WHERE table_name = '{table}' AND column_name = 'n'"
        ),
        _ => format!(
            "SELECT CAST(DATA_TYPE AS CHAR) FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}' AND COLUMN_NAME = 'n'"
        ),
    };
    db.strings(&sql).await.join(",")
}

fn widen(table: &str, server: Server) -> String {
    match server {
        Server::Postgres => format!("ALTER TABLE {table} ALTER COLUMN n TYPE bigint;"),
        _ => format!("ALTER TABLE {table} MODIFY COLUMN n BIGINT;"),
    }
}

async fn a_rewrite_of_a_big_table_is_refused_before_anything_runs(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    tables(&db, 20_000).await;
    let m = Migrations::new();
    m.add(1, "note", "CREATE TABLE notes (id INT);", None);
    m.add(2, "widen_big", &widen("big", server), None);
    let limit = ["--blocking-table-size", "256kB"];
    let out = dirthara(&db.url, m.path(), &[&["migrate"][..], &limit].concat())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("Error [BLOCKING_DDL]"), "{stderr}");
    let rule = match server {
        Server::Postgres => "changing-column-type",
        _ => "mysql-copying-alter",
    };
    assert!(
        stderr.contains(&format!("[{rule}]"))
            && stderr.contains("migration 2 (widen_big) up")
            && stderr.contains("2_widen_big.sql:1:")
            && stderr.contains("`big` holds")
            && stderr.contains(" rows, ")
            && stderr.contains("Safe way:")
            && stderr.contains("-- dirthara:allow-blocking <reason>"),
        "{stderr}"
    );
    // Nothing ran, nothing is recorded: not even migration 1, planned before it.
    assert!(!db.tables().await.contains(&"notes".to_string()));
    assert!(db.history().await.is_empty(), "{:?}", db.history().await);
    let (narrow, wide) = match server {
        Server::Postgres => ("integer", "bigint"),
        _ => ("int", "bigint"),
    };
    assert_eq!(type_of_n(&db, "big").await, narrow);

    // In JSON, every fact of the finding.
    let out = dirthara(
        &db.url,
        m.path(),
        &[&["migrate", "--output", "json"][..], &limit].concat(),
    )
    .output()
    .unwrap();
    let (stdout, _) = text(&out);
    let document: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(document["error"]["code"], "BLOCKING_DDL", "{stdout}");
    let finding = &document["error"]["findings"][0];
    assert_eq!(finding["rule"], rule, "{stdout}");
    assert_eq!(finding["table"], "big", "{stdout}");
    // MySQL's and MariaDB's row counts are the storage engine's estimate.
    let rows = finding["rows"].as_u64().unwrap();
    assert!((18_000..=22_000).contains(&rows), "{stdout}");
    assert!(finding["bytes"].as_u64().unwrap() > 256 * 1024, "{stdout}");
    assert!(finding["blocking_ms"].as_u64().is_some(), "{stdout}");

    // `--allow-blocking` lets it run, and says so.
    let out = dirthara(
        &db.url,
        m.path(),
        &[&["migrate", "--allow-blocking"][..], &limit].concat(),
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("warning [BLOCKING_DDL]") && stderr.contains("allowed (--allow-blocking)"),
        "{stderr}"
    );
    assert_eq!(type_of_n(&db, "big").await, wide);
}

#[tokio::test]
async fn postgres_a_rewrite_of_a_big_table_is_refused_before_anything_runs() {
    a_rewrite_of_a_big_table_is_refused_before_anything_runs(Server::Postgres).await;
}

#[tokio::test]
async fn mariadb_a_copying_alter_of_a_big_table_is_refused_before_anything_runs() {
    a_rewrite_of_a_big_table_is_refused_before_anything_runs(Server::Mysql).await;
}

/// The same statement on a small table runs, with the finding said as a warning; a file's
/// own `allow-blocking` reason lets a big one run and is printed when it does.
async fn a_small_table_runs_and_a_file_may_allow_a_big_one(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    tables(&db, 20_000).await;
    let m = Migrations::new();
    m.add(1, "widen_small", &widen("small", server), None);
    let allowed = format!(
        "-- dirthara:allow-blocking maintenance window of 5 December\n{}",
        widen("big", server)
    );
    m.add(2, "widen_big", &allowed, None);
    let out = dirthara(
        &db.url,
        m.path(),
        &["migrate", "--blocking-table-size", "256kB"],
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("migration 1 (widen_small) up")
            && stderr.contains("under blocking_table_size"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "migration 2 (widen_big) up runs a blocking statement, allowed \
                         (maintenance window of 5 December)"
        ),
        "{stderr}"
    );
    assert_eq!(type_of_n(&db, "small").await, "bigint");
    assert_eq!(type_of_n(&db, "big").await, "bigint");
}

#[tokio::test]
async fn postgres_a_small_table_runs_and_a_file_may_allow_a_big_one() {
    a_small_table_runs_and_a_file_may_allow_a_big_one(Server::Postgres).await;
}

#[tokio::test]
async fn mariadb_a_small_table_runs_and_a_file_may_allow_a_big_one() {
    a_small_table_runs_and_a_file_may_allow_a_big_one(Server::Mysql).await;
}

/// The safe forms run on a big table without a word: an online index, a constant default, a
/// `NOT VALID` constraint; on MariaDB an instant `ADD COLUMN`.
async fn the_safe_forms_run_on_a_big_table(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    tables(&db, 20_000).await;
    let m = Migrations::new();
    match server {
        Server::Postgres => {
            m.add(
                1,
                "index",
                "-- dirthara:no-transaction\nCREATE INDEX CONCURRENTLY big_n ON big (n);",
                None,
            );
            m.add(
                2,
                "status",
                "ALTER TABLE big ADD COLUMN status text NOT NULL DEFAULT 'new';",
                None,
            );
            m.add(
                3,
                "positive",
                "ALTER TABLE big ADD CONSTRAINT positive CHECK (n > 0) NOT VALID;",
                None,
            );
        }
        _ => {
            m.add(
                1,
                "status",
                "ALTER TABLE big ADD COLUMN status VARCHAR(10) NULL;",
                None,
            );
            m.add(
                2,
                "index",
                "ALTER TABLE big ADD INDEX big_n (n), ALGORITHM=INPLACE, LOCK=NONE;",
                None,
            );
        }
    }
    let out = dirthara(
        &db.url,
        m.path(),
        &["migrate", "--blocking-table-size", "256kB"],
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("BLOCKING_DDL"), "{stderr}");
}

#[tokio::test]
async fn postgres_the_safe_forms_run_on_a_big_table() {
    the_safe_forms_run_on_a_big_table(Server::Postgres).await;
}

#[tokio::test]
async fn mariadb_the_safe_forms_run_on_a_big_table() {
    the_safe_forms_run_on_a_big_table(Server::Mysql).await;
}
