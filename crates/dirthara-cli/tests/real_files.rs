//! Migration files as real projects write them, against real servers: files that manage their
//! own transaction, files that change their session (pg_dump output), MySQL `DELIMITER`
//! scripts, empty downs, `init_sql`, and errors that carry everything the database said.
//! Every fixture here is written for this project. One file (one test binary, one link) for
//! all real-world patterns: each test is its fixture and its assertions.

mod support;

use std::process::Output;
use std::time::Duration;

use support::servers::{Server, TestDb};
use support::{dirthara, spawn, text, Migrations};

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "not one JSON document ({e}): {}{}",
                self.stdout, self.stderr
            )
        })
    }

    fn ok(&self) -> &Self {
        assert_eq!(self.code, Some(0), "{}\n{}", self.stdout, self.stderr);
        self
    }

    fn failed(&self, code: &str) -> &Self {
        assert_eq!(self.code, Some(1), "{}\n{}", self.stdout, self.stderr);
        assert!(
            self.stderr.contains(&format!("Error [{code}]")),
            "expected {code}: {}",
            self.stderr
        );
        self
    }
}

fn run(db: &TestDb, m: &Migrations, args: &[&str]) -> Ran {
    let output: Output = dirthara(&db.url, m.path(), args).output().unwrap();
    let (stdout, stderr) = text(&output);
    Ran {
        code: output.status.code(),
        stdout,
        stderr,
    }
}

fn states(db: &TestDb, m: &Migrations) -> Vec<(i64, String)> {
    run(db, m, &["status", "--output", "json"]).ok().json()["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["version"].as_i64().unwrap(),
                s["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn state_of(db: &TestDb, m: &Migrations, version: i64) -> String {
    states(db, m)
        .into_iter()
        .find(|(v, _)| *v == version)
        .map(|(_, s)| s)
        .unwrap()
}

// ---- files that manage their own transaction ------------------------------------------------

#[tokio::test]
async fn a_file_with_its_own_begin_commit_runs_as_written_and_is_recorded() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "own_tx",
        "-- written for golang-migrate, which wraps nothing\nBEGIN;\nCREATE TABLE a (id int);\n\
         INSERT INTO a VALUES (1);\nCOMMIT;\n",
        Some("BEGIN;\nDROP TABLE a;\nCOMMIT;\n"),
    );
    let preview = run(&db, &m, &["preview", "migrate", "--output", "json"]);
    let step = &preview.ok().json()["steps"][0];
    assert_eq!(step["transactional"], false, "{step}");
    assert_eq!(
        step["own_transaction"], "`BEGIN` at line 2 of the up step",
        "{step}"
    );
    let human = run(&db, &m, &["preview", "migrate"]);
    assert!(
        human.stdout.contains("manages its own transaction"),
        "{}",
        human.stdout
    );
    run(&db, &m, &["migrate"]).ok();
    assert_eq!(
        db.tables().await,
        [
            "a",
            "dirthara_migrations",
            "dirthara_migrations_meta",
            "dirthara_migrations_schema"
        ]
    );
    assert_eq!(db.history().await, [(1, 1, "applied".to_string())]);
    run(&db, &m, &["rollback"]).ok();
    assert_eq!(db.history().await, []);
}

#[tokio::test]
async fn a_file_committing_then_failing_is_dirty_and_shows_its_own_error() {
    // The issue's reproduction: the file's COMMIT took effect, then the file failed.
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "commit_then_fail",
        "BEGIN; CREATE TABLE d (id int); COMMIT; SELECT 1/0;",
        None,
    );
    let ran = run(&db, &m, &["migrate", "--output", "json"]);
    ran.failed("MIGRATION_FAILED");
    assert!(ran.stderr.contains("division by zero"), "{}", ran.stderr);
    assert!(!ran.stderr.contains("LOCK_LEASE_LOST"), "{}", ran.stderr);
    let error = &ran.json()["error"];
    assert_eq!(error["database"]["code"], "22012", "{error}");
    assert_eq!(error["migration"]["left_dirty"], true, "{error}");
    // Never an applied change without a record: d exists, and so does the `running` record.
    assert!(db.tables().await.contains(&"d".to_string()));
    assert_eq!(state_of(&db, &m, 1), "dirty");
    let again = run(&db, &m, &["migrate"]);
    again.failed("DIRTY_MIGRATION");
    assert!(
        again.stderr.contains("migration 1 (commit_then_fail)"),
        "{}",
        again.stderr
    );
}

#[tokio::test]
async fn a_file_failing_its_own_sanity_check_inside_its_transaction_shows_that_error() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "base",
        "CREATE TABLE accounts (id int, balance int);",
        None,
    );
    m.add(
        2,
        "checked",
        "BEGIN;\nALTER TABLE accounts ADD COLUMN owner text;\n\
         DO $$\nBEGIN\n  IF (SELECT count(*) FROM accounts) = 0 THEN\n    \
         RAISE EXCEPTION 'sanity check: accounts is empty';\n  END IF;\nEND\n$$;\nCOMMIT;\n",
        None,
    );
    let ran = run(&db, &m, &["migrate"]);
    ran.failed("MIGRATION_FAILED");
    assert!(
        ran.stderr.contains("sanity check: accounts is empty"),
        "the file's own error: {}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("LOCK_LEASE_LOST"), "{}", ran.stderr);
    // It failed inside its own transaction, before its COMMIT: the rollback undid all of it,
    // so it is not left dirty, and there is nothing to resolve.
    assert!(!ran.stderr.contains("dirthara resolve 2"), "{}", ran.stderr);
    assert_eq!(
        states(&db, &m),
        [(1, "applied".into()), (2, "pending".into())]
    );
    // The operator fixes the data; the next run applies it.
    db.execute("INSERT INTO accounts VALUES (1, 10)").await;
    run(&db, &m, &["migrate"]).ok();
    assert_eq!(state_of(&db, &m, 2), "applied");
}

#[tokio::test]
async fn begin_inside_do_blocks_functions_strings_and_comments_is_not_transaction_control() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "routines",
        "-- BEGIN; in a comment\n/* COMMIT; */\nCREATE TABLE notes (body text DEFAULT 'BEGIN; COMMIT;');\n\
         DO $$ BEGIN PERFORM 1; END $$;\n\
         CREATE FUNCTION touch() RETURNS int LANGUAGE plpgsql AS $body$\nBEGIN\n  RETURN 1;\nEND;\n$body$;\n\
         CREATE TABLE \"begin\" (commit int);\n\
         -- a failing last statement proves the whole file was one transaction\n\
         SELECT 1/0;\n",
        None,
    );
    let preview = run(&db, &m, &["preview", "migrate", "--output", "json"]);
    let step = &preview.ok().json()["steps"][0];
    assert_eq!(step["transactional"], true, "{step}");
    assert!(step.get("own_transaction").is_none(), "{step}");
    run(&db, &m, &["migrate"]).failed("MIGRATION_FAILED");
    // Rolled back whole, and no record left behind.
    assert_eq!(
        db.tables().await,
        ["dirthara_migrations", "dirthara_migrations_meta"]
    );
    assert_eq!(db.history().await, []);
}

#[tokio::test]
async fn killing_a_runner_inside_a_self_managed_transaction_never_leaves_an_unrecorded_change() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "slow_own_tx",
        "BEGIN;\nCREATE TABLE k (id int);\nSELECT pg_sleep(1.5);\nCOMMIT;\nCREATE TABLE k2 (id int);\nSELECT pg_sleep(1.5);\n",
        None,
    );
    // Kill points before, inside and after the file's own COMMIT.
    for delay_ms in [150_u64, 900, 2_300, 4_000] {
        let mut child = spawn(dirthara(&db.url, m.path(), &["migrate"]));
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // Let the server notice the vanished client (client_connection_check_interval = 1s).
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let tables = db.tables().await;
        let history = db.history().await;
        let has = |t: &str| tables.contains(&t.to_string());
        if has("k") || has("k2") {
            assert_eq!(
                history.len(),
                1,
                "after {delay_ms} ms: {tables:?} without a record"
            );
        }
        if let Some((_, _, state)) = history.first() {
            if state == "applied" {
                assert!(
                    has("k") && has("k2"),
                    "recorded without its effect: {tables:?}"
                );
            }
        }
        // Reset for the next kill point.
        let clean = run(&db, &m, &["status", "--output", "json"]);
        clean.ok();
        if !history.is_empty() {
            db.execute(
                "DROP TABLE IF EXISTS k; DROP TABLE IF EXISTS k2; DELETE FROM dirthara_migrations",
            )
            .await;
        }
    }
}

// ---- files that change their session ---------------------------------------------------------

const PG_DUMP_STYLE: &str = "SET statement_timeout = 0;\nSET lock_timeout = 0;\n\
     SELECT pg_catalog.set_config('search_path', '', false);\n\
     SET check_function_bodies = false;\n\
     CREATE TABLE public.dumped (id integer NOT NULL);\n";

#[tokio::test]
async fn a_pg_dump_file_that_empties_search_path_does_not_move_the_history_or_the_next_file() {
    for two_runs in [false, true] {
        let Some(db) = TestDb::create(Server::Postgres).await else {
            return;
        };
        let m = Migrations::new();
        m.add(1, "dump", PG_DUMP_STYLE, None);
        m.add(2, "after", "CREATE TABLE plain_after (id int);", None);
        if two_runs {
            run(&db, &m, &["to", "1"]).ok();
        }
        run(&db, &m, &["migrate"]).ok();
        // Both recorded, and the unqualified table landed where a fresh session puts it.
        assert_eq!(
            db.history().await,
            [
                (1, 1, "applied".to_string()),
                (2, if two_runs { 2 } else { 1 }, "applied".to_string())
            ]
        );
        assert!(db.tables().await.contains(&"plain_after".to_string()));
    }
}

#[tokio::test]
async fn a_timeout_set_in_one_file_does_not_leak_into_the_next() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    // The timeout counts for the whole message file 1 is sent in, so it leaves room for it.
    m.add(
        1,
        "sets",
        "SET statement_timeout = '150ms';\nCREATE TABLE s1 (id int);",
        None,
    );
    m.add(
        2,
        "slow",
        "SELECT pg_sleep(0.4);\nCREATE TABLE s2 (id int);",
        None,
    );
    run(&db, &m, &["migrate"]).ok();
    assert_eq!(db.history().await.len(), 2);
}

// ---- init_sql ------------------------------------------------------------------------------

#[tokio::test]
async fn init_sql_runs_on_every_session_on_postgres() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "capture",
        "CREATE TABLE seen AS SELECT current_setting('statement_timeout') AS statement_timeout;",
        None,
    );
    m.add(2, "reset_it", "SET statement_timeout = '1min';", None);
    m.add(
        3,
        "capture_again",
        "INSERT INTO seen SELECT current_setting('statement_timeout');",
        None,
    );
    let preview = run(
        &db,
        &m,
        &[
            "preview",
            "migrate",
            "--init-sql",
            "SET statement_timeout = '5s'",
        ],
    );
    assert!(
        preview.ok().stdout.contains("SET statement_timeout = '5s'"),
        "preview shows init_sql: {}",
        preview.stdout
    );
    run(
        &db,
        &m,
        &["migrate", "--init-sql", "SET statement_timeout = '5s'"],
    )
    .ok();
    // Also after the reset that follows migration 2.
    assert_eq!(
        db.strings("SELECT statement_timeout FROM seen").await,
        ["5s", "5s"]
    );
}

#[tokio::test]
async fn init_sql_runs_on_mariadb_and_comes_from_the_environment_for_named_connections() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "capture",
        "CREATE TABLE seen AS SELECT @@SESSION.sql_mode AS mode, @dirthara_marker AS marker;",
        None,
    );
    let output = dirthara(&db.url, m.path(), &["migrate"])
        .env(
            "DIRTHARA_INIT_SQL_DEFAULT",
            "SET SESSION sql_mode = 'ANSI_QUOTES'; SET @dirthara_marker = 'from-env'",
        )
        .output()
        .unwrap();
    assert!(output.status.success(), "{:?}", text(&output));
    assert_eq!(
        db.strings("SELECT CONCAT(mode, ' ', marker) FROM seen")
            .await,
        ["ANSI_QUOTES from-env"]
    );
}

#[tokio::test]
async fn a_failing_init_sql_is_a_connection_error_naming_the_statement_and_changes_nothing() {
    for server in [Server::Postgres, Server::Mysql] {
        let Some(db) = TestDb::create(server).await else {
            return;
        };
        let m = Migrations::tables(1);
        let ran = run(
            &db,
            &m,
            &["migrate", "--init-sql", "SET no_such_setting_x = 1"],
        );
        ran.failed("CONNECTION_ERROR");
        assert!(
            ran.stderr.contains("cannot connect to `default`")
                && ran
                    .stderr
                    .contains("init_sql `SET no_such_setting_x = 1` failed"),
            "{server:?}: {}",
            ran.stderr
        );
        assert!(db.tables().await.is_empty(), "{server:?}");
    }
}

// ---- MySQL client scripts --------------------------------------------------------------------

#[tokio::test]
async fn mysql_delimiter_procedures_and_triggers_apply_as_the_mysql_client_would() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "ledger", "CREATE TABLE ledger (id INT PRIMARY KEY, amount INT);\nCREATE TABLE audit (note VARCHAR(64));", None);
    m.add(
        2,
        "procedure",
        "-- as mysqldump writes it\nDELIMITER $$\n\
         CREATE PROCEDURE add_entry(IN v INT)\nBEGIN\n  INSERT INTO ledger VALUES (v, v * 10);\n  \
         IF v > 100 THEN\n    INSERT INTO audit VALUES ('big');\n  END IF;\nEND$$\n\
         DELIMITER ;\nCALL add_entry(1);\n",
        Some("DROP PROCEDURE add_entry;"),
    );
    m.add(
        3,
        "trigger",
        "DELIMITER //\nCREATE TRIGGER ledger_audit AFTER INSERT ON ledger FOR EACH ROW\nBEGIN\n  \
         INSERT INTO audit VALUES (CONCAT('row ', NEW.id));\nEND //\nDELIMITER ;\n",
        Some("DROP TRIGGER ledger_audit;"),
    );
    m.add(
        4,
        "plain_trigger",
        "CREATE TRIGGER ledger_audit_del AFTER DELETE ON ledger FOR EACH ROW INSERT INTO audit VALUES ('deleted');",
        None,
    );
    run(&db, &m, &["migrate"]).ok();
    db.execute("CALL add_entry(200)").await;
    db.execute("DELETE FROM ledger WHERE id = 1").await;
    let mut audit = db.strings("SELECT note FROM audit").await;
    audit.sort();
    assert_eq!(audit, ["big", "deleted", "row 200"]);
    assert_eq!(db.history().await.len(), 4);
}

#[tokio::test]
async fn mysql_errors_carry_the_error_number_sqlstate_and_line() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "t", "CREATE TABLE t (id INT);", None);
    m.add(
        2,
        "again",
        "-- a second time\nCREATE TABLE t (id INT);",
        None,
    );
    m.add(3, "syntax", "SELECT 1;", None);
    let ran = run(&db, &m, &["migrate", "--output", "json"]);
    ran.failed("MIGRATION_FAILED");
    let database = &ran.json()["error"]["database"];
    assert_eq!(database["number"], 1050, "{database}");
    assert_eq!(database["code"], "42S01", "{database}");
    assert!(
        ran.stderr.contains("error 1050, SQLSTATE 42S01"),
        "{}",
        ran.stderr
    );

    let m = Migrations::new();
    m.add(
        1,
        "syntax",
        "-- line 1\n-- line 2\nCREATE TABLE u (\n  id INT,\n  name VARCHAR(10) WHAT\n);",
        None,
    );
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let ran = run(&db, &m, &["migrate", "--output", "json"]);
    ran.failed("MIGRATION_FAILED");
    let database = &ran.json()["error"]["database"];
    assert_eq!(database["number"], 1064, "{database}");
    // MariaDB points at the `)` after the bad word: line 6 of the file; Oracle MySQL at the
    // bad word itself: line 5.
    let line = if db.is_mariadb().await { 6 } else { 5 };
    assert_eq!(database["line"], line, "{database}");
}

// ---- empty downs -----------------------------------------------------------------------------

#[tokio::test]
async fn an_empty_down_reverses_nothing_and_the_rollback_is_recorded() {
    for server in [Server::Postgres, Server::Mysql] {
        let Some(db) = TestDb::create(server).await else {
            return;
        };
        let m = Migrations::new();
        m.add(
            1,
            "keep",
            "CREATE TABLE kept (id INT);",
            Some("-- nothing to undo: the table stays\n"),
        );
        m.add(2, "empty", "CREATE TABLE kept2 (id INT);", Some(""));
        run(&db, &m, &["migrate"]).ok();
        let preview = run(&db, &m, &["preview", "rollback", "--output", "json"]);
        let steps = preview.ok().json()["steps"].clone();
        assert_eq!(steps[0]["reverses_nothing"], true, "{steps}");
        let ran = run(&db, &m, &["rollback"]);
        ran.ok();
        assert!(ran.stdout.contains("nothing sent"), "{}", ran.stdout);
        assert_eq!(db.history().await, [], "{server:?}");
        assert!(
            db.tables().await.contains(&"kept2".to_string()),
            "{server:?}"
        );
    }
}

// ---- what the database said -----------------------------------------------------------------

#[tokio::test]
async fn postgres_errors_show_detail_hint_sqlstate_and_the_files_line_and_column() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "users",
        "CREATE TABLE users (id int);\nCREATE VIEW active AS SELECT * FROM users;",
        None,
    );
    m.add(
        2,
        "drop_users",
        "-- the view depends on it\nDROP TABLE users;",
        None,
    );
    let ran = run(&db, &m, &["migrate", "--output", "json"]);
    ran.failed("MIGRATION_FAILED");
    assert!(
        ran.stderr
            .contains("DETAIL: view active depends on table users"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("HINT: Use DROP ... CASCADE"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("SQLSTATE 2BP01"), "{}", ran.stderr);
    let database = &ran.json()["error"]["database"];
    assert_eq!(database["code"], "2BP01");
    assert_eq!(database["detail"], "view active depends on table users");

    // A position inside the file: line 4, column 3 (`oops`), whether the step is sent with
    // its guard and record (the default) or alone.
    let m2 = Migrations::new();
    m2.add(
        1,
        "typo",
        "-- header\nCREATE TABLE t (\n  id int,\n  oops oops\n);",
        None,
    );
    for extra in [&[][..], &["--no-lock"][..]] {
        let Some(db) = TestDb::create(Server::Postgres).await else {
            return;
        };
        let mut args = vec!["migrate", "--output", "json"];
        args.extend_from_slice(extra);
        let ran = run(&db, &m2, &args);
        ran.failed("MIGRATION_FAILED");
        let database = &ran.json()["error"]["database"];
        assert_eq!(
            (database["line"].as_i64(), database["column"].as_i64()),
            (Some(4), Some(8)),
            "{database}"
        );
        assert!(ran.stderr.contains("at line 4, column 8"), "{}", ran.stderr);
    }
}

#[tokio::test]
async fn a_terminated_session_is_reported_as_a_lost_connection_not_a_lost_lock() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "slow",
        "CREATE TABLE slow (id int);\nSELECT pg_sleep(20);",
        None,
    );
    let child = spawn(dirthara(&db.url, m.path(), &["migrate"]));
    // Wait until the step is running, then end its session as a server restart would.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let running = db
            .strings(&format!(
                "SELECT pid::text FROM pg_stat_activity WHERE datname = '{}' AND query LIKE '%pg_sleep(20)%' AND pid <> pg_backend_pid()",
                db.name
            ))
            .await;
        if !running.is_empty() {
            db.execute(&format!("SELECT pg_terminate_backend({})", running[0]))
                .await;
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the step never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = child.wait_with_output().unwrap();
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [MIGRATION_FAILED]"), "{stderr}");
    assert!(
        stderr.contains("terminating connection"),
        "the database's own words: {stderr}"
    );
    assert!(
        stderr.contains("connection to the database was lost"),
        "{stderr}"
    );
    assert!(stderr.contains("rolled back"), "{stderr}");
    assert!(!stderr.contains("LOCK_LEASE_LOST"), "{stderr}");
    // Nothing half-done: the step ran in a transaction with its record.
    assert!(!db.tables().await.contains(&"slow".to_string()));
}

#[tokio::test]
async fn a_mongodb_command_refused_before_writing_leaves_no_dirty_record() {
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let m = Migrations::new();
    m.add_as(
        "json",
        1,
        "refused",
        r#"[{"noSuchCommandDirthara": 1}]"#,
        None,
    );
    let ran = run(&db, &m, &["migrate"]);
    ran.failed("MIGRATION_FAILED");
    assert!(!ran.stderr.contains("resolve"), "not dirty: {}", ran.stderr);
    // The server's code, said once.
    assert_eq!(ran.stderr.matches("(code ").count(), 1, "{}", ran.stderr);
    assert_eq!(state_of(&db, &m, 1), "pending");
}

#[tokio::test]
async fn a_killed_mariadb_connection_is_reported_as_lost_and_the_migration_as_dirty() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "slow",
        "CREATE TABLE slow (id INT);\nSELECT SLEEP(20);",
        None,
    );
    let child = spawn(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--output", "json"],
    ));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let running = db
            .strings(
                // This test's database only: the server is shared, and another session's
                // statement is never ours to end.
                "SELECT CAST(ID AS CHAR) FROM information_schema.PROCESSLIST \
                 WHERE DB = DATABASE() AND INFO LIKE '%SLEEP(20)%' \
                 AND INFO NOT LIKE '%PROCESSLIST%'",
            )
            .await;
        if let Some(id) = running.first() {
            db.execute(&format!("KILL CONNECTION {id}")).await;
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the step never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [MIGRATION_FAILED]"), "{stderr}");
    assert!(
        stderr.contains("connection to the database was lost"),
        "{stderr}"
    );
    assert!(stderr.contains("half-applied"), "{stderr}");
    assert!(!stderr.contains("LOCK_LEASE_LOST"), "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["error"]["database"]["connection_lost"], true, "{doc}");
    // MySQL DDL committed on its own: the `running` record says so.
    assert_eq!(state_of(&db, &m, 1), "dirty");
}

// ---- statements that cannot run in a transaction ---------------------------------------------

/// A file made only of statements PostgreSQL refuses in a transaction block runs outside one,
/// in golang-migrate's layout as golang-migrate runs it; sqlx's `-- no-transaction` first line
/// is honoured; and a file mixing one with other statements, without its layout's marker, is
/// refused at load, naming the statement and the marker, before anything applies.
#[tokio::test]
async fn statements_that_cannot_run_in_a_transaction_are_settled_at_load() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "create_t", "CREATE TABLE t (a int, b int);", None);
    let write = |file: &str, text: &str| std::fs::write(m.path().join(file), text).unwrap();
    write(
        "2_index_a.up.sql",
        "-- golang-migrate runs this file as it is\nCREATE INDEX CONCURRENTLY t_a ON t (a);\n",
    );
    write("2_drop_index_a.down.sql", "DROP INDEX CONCURRENTLY t_a;\n");
    write(
        "3_index_b.up.sql",
        "-- no-transaction\nCREATE INDEX CONCURRENTLY t_b ON t (b);\nANALYZE t;\n",
    );
    write(
        "4_mixed.up.sql",
        "CREATE TABLE u (a int);\n\nCREATE INDEX CONCURRENTLY u_a ON u (a);\n",
    );
    let refused = run(&db, &m, &["migrate"]);
    refused.failed("INVALID_MIGRATION");
    assert!(
        refused
            .stderr
            .contains("4_mixed.up.sql: line 3: `CREATE INDEX CONCURRENTLY` cannot run")
            && refused
                .stderr
                .contains("add `-- dirthara:no-transaction` as its first line"),
        "{}",
        refused.stderr
    );
    assert_eq!(db.tables().await, Vec::<String>::new(), "nothing applied");
    // Each layout's refusal names the marker that layout takes, at the file's own line.
    for (file, text, said) in [
        (
            "1_a.sql",
            "-- +goose Up\nCREATE TABLE v (a int);\nVACUUM v;\n",
            "line 3: `VACUUM` cannot run inside a transaction, and the step has other \
             statements, which would run in one; add `-- +goose NO TRANSACTION` to the file",
        ),
        (
            "1_a.sql",
            "-- migrate:up\nCREATE TABLE v (a int);\nVACUUM v;\n-- migrate:down\n",
            "line 3: `VACUUM` cannot run inside a transaction, and the step has other \
             statements, which would run in one; add ` transaction:false` to its `-- migrate:up`",
        ),
    ] {
        let other = Migrations::new();
        std::fs::write(other.path().join(file), text).unwrap();
        let refused = run(&db, &other, &["migrate"]);
        refused.failed("INVALID_MIGRATION");
        assert!(refused.stderr.contains(said), "{}", refused.stderr);
    }

    write(
        "4_mixed.up.sql",
        "-- dirthara:no-transaction\nCREATE TABLE u (a int);\nCREATE INDEX CONCURRENTLY u_a ON u (a);\n",
    );
    write("3_drop_index_b.down.sql", "DROP INDEX CONCURRENTLY t_b;\n");
    write("4_mixed.down.sql", "DROP TABLE u;\n");
    let preview = run(&db, &m, &["preview", "migrate", "--output", "json"]);
    let steps = preview.ok().json()["steps"].clone();
    let transactional: Vec<_> = (0..4).map(|i| steps[i]["transactional"].clone()).collect();
    assert_eq!(transactional, [true, false, false, false], "{steps}");
    let human = run(&db, &m, &["preview", "migrate"]).ok().stdout.clone();
    let notes: Vec<_> = (human.lines())
        .filter(|l| l.starts_with("-- up "))
        .map(|l| l.contains("no transaction"))
        .collect();
    assert_eq!(notes, [false, true, true, true], "{human}");
    run(&db, &m, &["migrate"]).ok();
    let indexes = db
        .strings("SELECT indexname FROM pg_indexes WHERE tablename IN ('t', 'u') ORDER BY 1")
        .await;
    assert_eq!(indexes, ["t_a", "t_b", "u_a"]);
    run(&db, &m, &["to", "1"]).ok();
    assert_eq!(
        db.strings("SELECT indexname FROM pg_indexes WHERE tablename = 't'")
            .await,
        Vec::<String>::new()
    );
}

/// Flyway's script configuration, `V<n>__x.sql.conf` beside its script:
/// `executeInTransaction=false` runs the script outside a transaction, as Flyway runs it, and
/// the refusal of a script that needs it names that file; a setting dirthara does not apply
/// (`shouldExecute`) is refused at load, naming it, before anything runs.
#[tokio::test]
async fn a_flyway_script_configuration_runs_its_script_outside_a_transaction() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    let write = |file: &str, text: &str| std::fs::write(m.path().join(file), text).unwrap();
    write("V1__create_t.sql", "CREATE TABLE t (a int);\n");
    write(
        "V2__index.sql",
        "ANALYZE t;\nCREATE INDEX CONCURRENTLY t_a ON t (a);\n",
    );
    let refused = run(&db, &m, &["migrate"]);
    refused.failed("INVALID_MIGRATION");
    assert!(
        refused
            .stderr
            .contains("V2__index.sql: line 2: `CREATE INDEX CONCURRENTLY` cannot run")
            && refused.stderr.contains(
                "add `executeInTransaction=false` to its Flyway script configuration, a file \
                 named as the script with `.conf` added (`V1__x.sql.conf`)"
            ),
        "{}",
        refused.stderr
    );
    write(
        "V2__index.sql.conf",
        "# as Flyway runs it\nexecuteInTransaction=false\nencoding=UTF-8\n",
    );
    let ran = run(&db, &m, &["migrate"]);
    assert!(!ran.ok().stderr.contains(".conf"), "{}", ran.stderr);
    let indexes = db
        .strings("SELECT indexname FROM pg_indexes WHERE tablename = 't'")
        .await;
    assert_eq!(indexes, ["t_a"]);

    write("V3__u.sql", "CREATE TABLE u (a int);\n");
    write("V3__u.sql.conf", "shouldExecute=false\n");
    let refused = run(&db, &m, &["migrate"]);
    refused.failed("INVALID_MIGRATION");
    assert!(
        refused.stderr.contains(
            "V3__u.sql.conf: line 1: `shouldExecute` is a Flyway script setting dirthara does \
             not apply"
        ),
        "{}",
        refused.stderr
    );
    assert!(!db.tables().await.contains(&"u".to_string()));
}

/// A server error whose message, DETAIL and HINT span several lines stays one block: every
/// line after the first of each is indented like the block's other lines.
#[tokio::test]
async fn a_server_error_spanning_lines_keeps_the_blocks_indentation() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "raise",
        "DO $$ BEGIN RAISE EXCEPTION E'first line\\nsecond line' \
         USING DETAIL = E'detail one\\ndetail two', HINT = E'hint one\\nhint two'; END $$;",
        None,
    );
    let ran = run(&db, &m, &["migrate"]);
    ran.failed("MIGRATION_FAILED");
    for block in [
        "first line\n  second line (SQLSTATE P0001)\n",
        "\n  DETAIL: detail one\n  detail two\n",
        "\n  HINT: hint one\n  hint two\n",
    ] {
        assert!(ran.stderr.contains(block), "{block:?} in:\n{}", ran.stderr);
    }
    let lines: Vec<_> = ran.stderr.lines().skip(1).collect();
    assert!(
        lines.iter().all(|l| l.starts_with("  ") || l.is_empty()),
        "{}",
        ran.stderr
    );
}

/// A server that turns read-only under a run (a primary demoted by a failover) is a lost
/// writer, not a failing migration: the run says the connection was lost and why. The first
/// step makes the session read-only for every later transaction, as a demotion would.
#[tokio::test]
async fn a_server_answering_read_only_is_reported_as_a_lost_writer() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "demote",
        "CREATE TABLE before_demotion (id int);\nSET SESSION default_transaction_read_only = on;",
        None,
    );
    m.add(2, "after", "CREATE TABLE after_demotion (id int);", None);
    let output = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("read-only transaction"), "{stderr}");
    assert!(
        stderr.contains("connection to the database was lost"),
        "{stderr}"
    );
    assert!(stderr.contains("the server answered read-only"), "{stderr}");
    assert!(!db.tables().await.contains(&"after_demotion".to_string()));
}

/// MariaDB made read-only under an application's login (a primary demoted by a failover, or
/// an operator's `SET GLOBAL read_only`), on a private server of the test's own: the next
/// migration's first write (its `running` marker) is refused with MySQL error 1290, and the run
/// reports the connection lost to a read-only server, not a broken history; nothing of that
/// migration is applied.
#[tokio::test]
async fn a_server_demoted_to_read_only_under_an_application_login_is_a_lost_writer() {
    use support::private_server::PrivateServer;
    let Some(server) = PrivateServer::start_or_skip(Server::Mysql) else {
        return;
    };
    let db = TestDb::try_create_at(Server::Mysql, &server.admin_url())
        .await
        .unwrap();
    // Not root: read_only stops every login without READ ONLY ADMIN (or SUPER).
    let app = db.user("app", "app_pw").await;
    db.execute(&format!("GRANT ALL ON {}.* TO '{}'@'%'", db.name, app.name))
        .await;
    let url = app.url(&db.url);
    let m = Migrations::new();
    m.add(1, "before", "CREATE TABLE before_demotion (id int)", None);
    let first = dirthara(&url, m.path(), &["migrate"]).output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{:?}", text(&first));
    m.add(2, "after", "CREATE TABLE after_demotion (id int)", None);
    db.execute("SET GLOBAL read_only = ON").await;
    let output = dirthara(&url, m.path(), &["migrate"]).output().unwrap();
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("running with the --read-only option"),
        "{stderr}"
    );
    assert!(
        stderr.contains("connection to the database was lost")
            && stderr.contains("the server answered read-only"),
        "{stderr}"
    );
    db.execute("SET GLOBAL read_only = OFF").await;
    assert!(!db.tables().await.contains(&"after_demotion".to_string()));
}
