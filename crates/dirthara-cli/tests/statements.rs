//! Statements, not files: a step that cannot run in one transaction runs statement by
//! statement in every layout (goose `NO TRANSACTION`, dbmate `transaction:false`, Diesel
//! `run_in_transaction = false`, dirthara's `no-transaction`), as goose, dbmate, psql and the mysql client run it; a failing statement
//! is named by the file and its line (and column where the server gives a position); and a
//! step whose first statement fails changed nothing, so it is not left dirty.

mod support;

use std::path::Path;

use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

/// Runs `args` with JSON output; returns (exit code, the JSON document, stderr).
fn run(db: &TestDb, dir: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut all = args.to_vec();
    all.extend(["--output", "json"]);
    let out = dirthara(&db.url, dir, &all).output().unwrap();
    let (stdout, stderr) = text(&out);
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    (out.status.code().unwrap(), doc, stderr)
}

fn ok(db: &TestDb, dir: &Path, args: &[&str]) -> serde_json::Value {
    let (code, doc, stderr) = run(db, dir, args);
    assert_eq!(code, 0, "{args:?}: {doc}\n{stderr}");
    doc
}

fn states(db: &TestDb, dir: &Path) -> Vec<String> {
    let doc = ok(db, dir, &["status"]);
    (doc["migrations"].as_array().unwrap().iter())
        .map(|m| m["state"].as_str().unwrap().to_string())
        .collect()
}

async fn indexes(db: &TestDb) -> Vec<String> {
    let sql = match db.server {
        Server::Postgres => {
            "SELECT indexname::text FROM pg_indexes WHERE tablename = 't' ORDER BY 1"
        }
        _ => {
            "SELECT DISTINCT CAST(index_name AS CHAR) FROM information_schema.statistics \
              WHERE table_schema = DATABASE() AND table_name = 't' AND index_name <> 'PRIMARY' \
              ORDER BY 1"
        }
    };
    db.strings(sql).await
}

/// Each layout's non-transactional file with two index builds (PostgreSQL: `CONCURRENTLY`,
/// which refuses to share a message or a transaction), applied and reversed.
async fn every_layout_runs_a_non_transactional_step_statement_by_statement(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let concurrently = if server == Server::Postgres {
        " CONCURRENTLY"
    } else {
        ""
    };
    let drop = |index: &str| match server {
        Server::Postgres => format!("DROP INDEX CONCURRENTLY {index};"),
        _ => format!("DROP INDEX {index} ON t;"),
    };
    let create =
        |index: &str, column: &str| format!("CREATE INDEX{concurrently} {index} ON t ({column});");
    db.execute("CREATE TABLE t (a INT, b INT, c INT, d INT, e INT, f INT)")
        .await;
    // (layout, its migration's version, the indexes it makes, its files and their text)
    type Layout<'a> = (&'a str, u64, String, Vec<(&'a str, String)>);
    let layouts: [Layout; 4] = [
        (
            "goose",
            1,
            "ia ib".into(),
            vec![(
                "1_goose.sql",
                format!(
                    "-- +goose NO TRANSACTION\n-- +goose Up\n{}\n{}\n-- +goose Down\n{}\n{}\n",
                    create("ia", "a"),
                    create("ib", "b"),
                    drop("ia"),
                    drop("ib")
                ),
            )],
        ),
        (
            "dbmate",
            1,
            "ic id".into(),
            vec![(
                "1_dbmate.sql",
                format!(
                    "-- migrate:up transaction:false\n{}\n{}\n\n-- migrate:down transaction:false\n{}\n{}\n",
                    create("ic", "c"),
                    create("id", "d"),
                    drop("ic"),
                    drop("id")
                ),
            )],
        ),
        (
            "dirthara",
            1,
            "ie if".into(),
            vec![
                (
                    "1_plain.up.sql",
                    format!(
                        "-- dirthara:no-transaction\n{}\n{}\n",
                        create("ie", "e"),
                        create("if_", "f")
                    ),
                ),
                (
                    "1_plain.down.sql",
                    format!("-- dirthara:no-transaction\n{}\n{}\n", drop("ie"), drop("if_")),
                ),
            ],
        ),
        (
            // Diesel says it in the folder's metadata.toml, for both files.
            "diesel",
            20240101000000,
            "ig ih".into(),
            vec![
                (
                    "2024-01-01-000000_concurrently/metadata.toml",
                    "run_in_transaction = false\n".into(),
                ),
                (
                    "2024-01-01-000000_concurrently/up.sql",
                    format!("{}\n{}\n", create("ig", "a"), create("ih", "b")),
                ),
                (
                    "2024-01-01-000000_concurrently/down.sql",
                    format!("{}\n{}\n", drop("ig"), drop("ih")),
                ),
            ],
        ),
    ];
    for (layout, version, made, files) in layouts {
        let dir = support::scratch_dir();
        for (name, body) in &files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        let history = format!("history_{layout}");
        let args = |command: &'static str| [command, "--history-table", history.as_str()];
        let applied = ok(&db, dir.path(), &args("migrate"));
        assert_eq!(
            applied["applied"][0]["version"], version,
            "{layout}: {applied}"
        );
        let made: Vec<String> = made
            .split(' ')
            .map(|i| {
                if i == "if" {
                    "if_".to_string()
                } else {
                    i.to_string()
                }
            })
            .collect();
        let now = indexes(&db).await;
        assert!(made.iter().all(|i| now.contains(i)), "{layout}: {now:?}");
        ok(
            &db,
            dir.path(),
            &["rollback", "--history-table", history.as_str()],
        );
        let now = indexes(&db).await;
        assert!(!made.iter().any(|i| now.contains(i)), "{layout}: {now:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_every_layout_runs_a_non_transactional_step_statement_by_statement() {
    every_layout_runs_a_non_transactional_step_statement_by_statement(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_every_layout_runs_a_non_transactional_step_statement_by_statement() {
    every_layout_runs_a_non_transactional_step_statement_by_statement(Server::Mysql).await;
}

/// The first statement fails: nothing changed, so no `running` marker stays behind and the
/// next run is not told the migration is dirty. A later statement fails: the first one
/// committed, so the migration is dirty, and says why.
async fn only_a_step_that_may_have_committed_is_left_dirty(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "first_fails",
        "-- dirthara:no-transaction\nINSERT INTO nowhere VALUES (1);\nCREATE TABLE never (id INT);\n",
        None,
    );
    let (code, doc, stderr) = run(&db, m.path(), &["migrate"]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["error"]["code"], "MIGRATION_FAILED", "{doc}");
    assert_eq!(doc["error"]["migration"]["left_dirty"], false, "{doc}");
    assert_eq!(doc["error"]["database"]["line"], 2, "{doc}");
    assert!(!stderr.contains("marks it as running"), "{stderr}");
    assert_eq!(states(&db, m.path()), ["pending"]);

    let m = Migrations::new();
    m.add(
        1,
        "second_fails",
        "-- dirthara:no-transaction\nCREATE TABLE made (id INT);\n\nINSERT INTO nowhere VALUES (1);\n",
        None,
    );
    let history = ["--history-table", "second"];
    let mut args = vec!["migrate"];
    args.extend(history);
    let (code, doc, _) = run(&db, m.path(), &args);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["error"]["migration"]["left_dirty"], true, "{doc}");
    assert_eq!(doc["error"]["database"]["line"], 4, "{doc}");
    let (code, doc, _) = run(&db, m.path(), &args);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "DIRTY_MIGRATION", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nowhere"),
        "the cause is quoted: {doc}"
    );
    // The next operator sees why, in human output too, and `status` keeps the cause whole:
    // the database's message and code, and the file's line.
    let human = dirthara(&db.url, m.path(), &args).output().unwrap();
    let (_, stderr) = text(&human);
    assert!(stderr.contains("Error [DIRTY_MIGRATION]"), "{stderr}");
    assert!(
        stderr.contains("nowhere") && stderr.contains("at line 4"),
        "{stderr}"
    );
    let mut status = vec!["status"];
    status.extend(history);
    let doc = ok(&db, m.path(), &status);
    let failure = &doc["migrations"][0]["failure"];
    assert_eq!(doc["migrations"][0]["state"], "dirty", "{doc}");
    assert!(
        failure["message"].as_str().unwrap().contains("nowhere"),
        "{doc}"
    );
    let code = match server {
        Server::Postgres => "42P01",
        _ => "42S02",
    };
    assert_eq!(failure["code"], code, "{doc}");
    assert_eq!(failure["line"], 4, "{doc}");
    let human = dirthara(&db.url, m.path(), &status).output().unwrap();
    let (stdout, _) = text(&human);
    let said = format!("1 left dirty by: {}", failure["message"].as_str().unwrap());
    assert!(stdout.contains(&said), "{said}: {stdout}");
    assert!(
        stdout.contains(&format!("SQLSTATE {code}) at line 4")),
        "{stdout}"
    );

    // goose, dbmate and golang-migrate files outside a transaction are sent statement by
    // statement too: the first statement fails, and nothing of the rest ran (its table is not
    // there), nor the migration after it. A golang-migrate file has no marker: on PostgreSQL
    // it is outside a transaction when made only of statements refused in one (`VACUUM`), on
    // MySQL when it holds DDL, which commits implicitly.
    let golang_migrate = match server {
        Server::Postgres => "VACUUM nowhere;\nVACUUM;\n",
        _ => "INSERT INTO nowhere VALUES (1);\nCREATE TABLE m (id INT);\n",
    };
    let files = [
        (
            "1_golang_migrate.up.sql",
            golang_migrate.to_string(),
            1,
        ),
        (
            "1_goose.sql",
            "-- +goose NO TRANSACTION\n-- +goose Up\nINSERT INTO nowhere VALUES (1);\nCREATE TABLE g (id INT);\n".to_string(),
            3,
        ),
        (
            "1_dbmate.sql",
            "-- migrate:up transaction:false\nINSERT INTO nowhere VALUES (1);\nCREATE TABLE d (id INT);\n\n-- migrate:down\n".to_string(),
            2,
        ),
    ];
    for (name, body, line) in files {
        let dir = support::scratch_dir();
        std::fs::write(dir.path().join(name), body).unwrap();
        let after = match name.ends_with(".up.sql") {
            true => ("2_after.up.sql", "CREATE TABLE after_it (id INT);\n"),
            false if name.contains("goose") => (
                "2_after.sql",
                "-- +goose Up\nCREATE TABLE after_it (id INT);\n",
            ),
            false => (
                "2_after.sql",
                "-- migrate:up\nCREATE TABLE after_it (id INT);\n-- migrate:down\n",
            ),
        };
        std::fs::write(dir.path().join(after.0), after.1).unwrap();
        let history = format!("h_{}", name.replace('.', "_"));
        let (code, doc, _) = run(&db, dir.path(), &["migrate", "--history-table", &history]);
        assert_eq!(code, 1, "{name}: {doc}");
        assert_eq!(
            doc["error"]["migration"]["left_dirty"], false,
            "{name}: {doc}"
        );
        assert_eq!(doc["error"]["database"]["line"], line, "{name}: {doc}");
        // The table's absence, not a transaction refusing the statement (PostgreSQL's 25001).
        let absent = match server {
            Server::Postgres => "42P01",
            _ => "42S02",
        };
        assert_eq!(doc["error"]["database"]["code"], absent, "{name}: {doc}");
        if server == Server::Postgres || !name.contains("golang") {
            // (On MySQL a golang-migrate file is in no transaction because its DDL commits
            // implicitly, which the step's flag does not say.)
            let outside = &doc["error"]["migration"]["transactional"];
            assert_eq!(outside, false, "{name}: {doc}");
        }
        let (_, doc, _) = run(&db, dir.path(), &["status", "--history-table", &history]);
        assert_eq!(doc["migrations"][0]["state"], "pending", "{name}: {doc}");
        assert_eq!(doc["migrations"][1]["state"], "pending", "{name}: {doc}");
    }
    let tables = db.tables().await;
    assert!(
        !(tables.iter()).any(|t| ["g", "d", "m", "never", "after_it"].contains(&t.as_str())),
        "{tables:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_only_a_step_that_may_have_committed_is_left_dirty() {
    only_a_step_that_may_have_committed_is_left_dirty(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_only_a_step_that_may_have_committed_is_left_dirty() {
    only_a_step_that_may_have_committed_is_left_dirty(Server::Mysql).await;
}

/// (file text, the line the error must name, column when the server gives a position).
fn located(server: Server) -> Vec<(&'static str, String, usize, Option<usize>)> {
    let mut cases = vec![
        (
            "dependency",
            // No position: DROP refused for a table another one refers to, in the 4th line.
            "CREATE TABLE parent (id INT PRIMARY KEY);\n\
             CREATE TABLE child (p INT, FOREIGN KEY (p) REFERENCES parent (id));\n\n\
             DROP TABLE parent;\n"
                .to_string(),
            4,
            None,
        ),
        (
            "constraint",
            "CREATE TABLE u (id INT PRIMARY KEY);\nINSERT INTO u VALUES (1);\n-- again\n\
             INSERT INTO u VALUES (1);\n"
                .to_string(),
            4,
            None,
        ),
        (
            "no_transaction",
            "-- dirthara:no-transaction\nCREATE TABLE v (id INT);\nCREATE TABLE w (id INT);\n\
             INSERT INTO v VALUES (1); INSERT INTO missing VALUES (2);\n"
                .to_string(),
            4,
            None,
        ),
    ];
    match server {
        Server::Postgres => {
            cases.push((
                "raise",
                "CREATE TABLE r (id INT);\nINSERT INTO r VALUES (1);\nINSERT INTO r VALUES (2);\n\
                 DO $$ BEGIN RAISE EXCEPTION 'refused in the fourth statement'; END $$;\n"
                    .to_string(),
                4,
                None,
            ));
            // A position: the column of the bad word, on its line.
            cases.push((
                "syntax",
                "CREATE TABLE s (id INT);\n\nSELECT id FROM s WHERE nope = 1;\n".to_string(),
                3,
                Some(24),
            ));
            // A position inside a step sent statement by statement: the statement's own
            // position, on the file's line (after the timeout's `SET LOCAL` sent with it).
            cases.push((
                "syntax_no_transaction",
                "-- dirthara:no-transaction\nCREATE TABLE q (id INT);\n  SELECT id FROM q WHERE nope = 1;\n"
                    .to_string(),
                3,
                Some(26),
            ));
        }
        _ => cases.push((
            "syntax",
            "CREATE TABLE s (id INT);\n\nSELECT id FROM s WHERE WHERE 1;\n".to_string(),
            3,
            None,
        )),
    }
    cases
}

async fn every_failing_statement_is_located(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    for (name, body, line, column) in located(server) {
        let m = Migrations::new();
        m.add(1, name, &body, None);
        let history = format!("h_{name}");
        let (code, doc, stderr) = run(&db, m.path(), &["migrate", "--history-table", &history]);
        assert_eq!(code, 1, "{name}: {doc}");
        let database = &doc["error"]["database"];
        assert_eq!(database["line"], line, "{name}: {doc}");
        if let Some(column) = column {
            assert_eq!(database["column"], column, "{name}: {doc}");
        }
        let file = database["file"].as_str().unwrap();
        assert!(file.ends_with(&format!("1_{name}.sql")), "{name}: {file}");
        assert!(
            stderr.contains(&format!("at line {line}")),
            "{name}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_every_failing_statement_is_located() {
    every_failing_statement_is_located(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_every_failing_statement_is_located() {
    every_failing_statement_is_located(Server::Mysql).await;
}

/// In a sectioned file the line is the file's, not the section's: goose drops its
/// `StatementBegin`/`StatementEnd` lines from the text it runs, dbmate starts below its
/// marker.
#[tokio::test(flavor = "multi_thread")]
async fn a_line_in_a_dbmate_or_goose_file_is_the_files_line() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let files = [
        (
            "1_dbmate.sql",
            "-- a comment\n-- migrate:up\nCREATE TABLE a (id INT);\nINSERT INTO missing VALUES (1);\n\n-- migrate:down\nDROP TABLE a;\n",
            4,
        ),
        (
            "1_goose.sql",
            "-- +goose Up\n-- +goose StatementBegin\nCREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql;\n-- +goose StatementEnd\nCREATE TABLE b (id INT);\nINSERT INTO missing VALUES (1);\n-- +goose Down\nDROP TABLE b;\n",
            6,
        ),
    ];
    for (name, body, line) in files {
        let dir = support::scratch_dir();
        std::fs::write(dir.path().join(name), body).unwrap();
        let after = match name.ends_with(".up.sql") {
            true => ("2_after.up.sql", "CREATE TABLE after_it (id INT);\n"),
            false if name.contains("goose") => (
                "2_after.sql",
                "-- +goose Up\nCREATE TABLE after_it (id INT);\n",
            ),
            false => (
                "2_after.sql",
                "-- migrate:up\nCREATE TABLE after_it (id INT);\n-- migrate:down\n",
            ),
        };
        std::fs::write(dir.path().join(after.0), after.1).unwrap();
        let history = format!("h_{}", name.replace('.', "_"));
        let (code, doc, _) = run(&db, dir.path(), &["migrate", "--history-table", &history]);
        assert_eq!(code, 1, "{name}: {doc}");
        assert_eq!(doc["error"]["database"]["line"], line, "{name}: {doc}");
    }
}
