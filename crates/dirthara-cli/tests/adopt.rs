//! Switching from another tool, against real servers: `baseline --from <tool>` reads each
//! tool's history table as that tool writes it (DDL and rows taken from each tool's source,
//! written here by hand), records what it applied, and `migrate` then applies only the
//! newer files. Every refusal, and each layout's files applied and rolled back for real.
//! Every fixture here is written for this project.

mod adoption;
mod support;

use std::path::Path;

use adoption::{history_sql, tools, write_files, Files, SEQ, TS};
use support::servers::{Server, TestDb};
use support::{dirthara, scratch_dir, text};

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

    #[track_caller]
    fn ok(&self, context: &str) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "{context}\n{}\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    fn refused(&self, context: &str, needles: &[&str]) -> &Self {
        assert_eq!(
            self.code,
            Some(1),
            "{context}\n{}\n{}",
            self.stdout,
            self.stderr
        );
        for needle in needles {
            assert!(
                self.stderr.contains(needle),
                "{context}: expected `{needle}` in:\n{}",
                self.stderr
            );
        }
        self
    }
}

fn run(db: &TestDb, dir: &Path, args: &[&str]) -> Ran {
    let output = dirthara(&db.url, dir, args).output().unwrap();
    let (stdout, stderr) = text(&output);
    Ran {
        code: output.status.code(),
        stdout,
        stderr,
    }
}

/// The versions of a JSON report's `field` (`recorded`, `applied`, `reverted`).
fn versions(doc: &serde_json::Value, field: &str) -> Vec<i64> {
    doc[field]
        .as_array()
        .unwrap_or_else(|| panic!("no `{field}` in {doc}"))
        .iter()
        .map(|s| s["version"].as_i64().unwrap())
        .collect()
}

async fn count(db: &TestDb, table: &str) -> String {
    let sql = match db.server {
        Server::Postgres => format!("SELECT count(*)::text FROM {table}"),
        _ => format!("SELECT CAST(count(*) AS CHAR) FROM {table}"),
    };
    db.strings(&sql).await.remove(0)
}

async fn every_tool_is_adopted(server: Server) {
    for tool in tools() {
        let Some(db) = TestDb::create(server).await else {
            return;
        };
        let context = format!("{} on {}", tool.name, server.name());
        let dir = scratch_dir();
        write_files(dir.path(), tool.files, &tool.versions);
        // The schema as the tool left it: migrations 1 and 2 ran.
        db.execute("CREATE TABLE adopt_t1 (id INT)").await;
        db.execute("CREATE TABLE adopt_t2 (id INT)").await;
        let applied = &tool.versions[..2];
        db.execute(&history_sql(tool.name, server, tool.table, applied, false))
            .await;
        let rows_before = count(&db, tool.table).await;

        let preview = run(
            &db,
            dir.path(),
            &[
                "--output", "json", "preview", "baseline", "--from", tool.name,
            ],
        );
        assert_eq!(
            versions(&preview.ok(&context).json(), "recorded"),
            applied,
            "{context}"
        );
        assert!(
            !db.tables()
                .await
                .contains(&"dirthara_migrations".to_string()),
            "{context}: preview wrote"
        );

        let adopted = run(&db, dir.path(), &["baseline", "--from", tool.name]);
        adopted.ok(&context);
        if tool.name == "golang-migrate" {
            assert!(
                adopted.stderr.contains("every file up to version 2"),
                "{context}: {}",
                adopted.stderr
            );
        }
        let history: Vec<i64> = db
            .history()
            .await
            .iter()
            .map(|(v, batch, state)| {
                assert_eq!((*batch, state.as_str()), (1, "applied"), "{context}");
                *v
            })
            .collect();
        assert_eq!(history, applied, "{context}");
        assert_eq!(
            count(&db, tool.table).await,
            rows_before,
            "{context}: the tool's table changed"
        );

        let migrated = run(&db, dir.path(), &["--output", "json", "migrate"]);
        assert_eq!(
            versions(&migrated.ok(&context).json(), "applied"),
            vec![tool.versions[2]],
            "{context}"
        );
        assert!(
            db.tables().await.contains(&"adopt_t3".to_string()),
            "{context}"
        );

        run(&db, dir.path(), &["baseline", "--from", tool.name]).refused(
            &context,
            &["Error [CONFIG_ERROR]", "already has 3 record(s)"],
        );
    }
}

#[tokio::test]
async fn every_tool_is_adopted_on_postgres() {
    every_tool_is_adopted(Server::Postgres).await;
}

#[tokio::test]
async fn every_tool_is_adopted_on_mariadb() {
    every_tool_is_adopted(Server::Mysql).await;
}

/// A refused adoption writes nothing: no dirthara history appears.
async fn refused_cleanly(db: &TestDb, context: &str) {
    let tables = db.tables().await;
    assert!(
        !tables.contains(&"dirthara_migrations".to_string()),
        "{context}: {tables:?}"
    );
}

async fn every_refusal(server: Server) {
    let tools = tools();
    let find = |name: &str| tools.iter().find(|t| t.name == name).unwrap();
    // A failed or dirty entry, each in its tool's own words.
    for (name, fix) in [
        ("sqlx", "sqlx migrate run"),
        ("golang-migrate", "migrate force 2"),
        ("flyway", "flyway repair"),
    ] {
        let Some(db) = TestDb::create(server).await else {
            return;
        };
        let tool = find(name);
        let dir = scratch_dir();
        write_files(dir.path(), tool.files, &tool.versions);
        db.execute(&history_sql(
            name,
            server,
            tool.table,
            &tool.versions[..2],
            true,
        ))
        .await;
        let context = format!("failed {name} on {}", server.name());
        let version = tool.versions[1].to_string();
        run(&db, dir.path(), &["baseline", "--from", name])
            .refused(&context, &[&format!("version {version} marked"), fix]);
        refused_cleanly(&db, &context).await;
    }

    // A version applied there without a file here.
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let dir = scratch_dir();
    write_files(dir.path(), Files::Dbmate, &TS[..1]);
    db.execute(&history_sql(
        "dbmate",
        server,
        "schema_migrations",
        &[TS[0], 20240105000000],
        false,
    ))
    .await;
    run(&db, dir.path(), &["baseline", "--from", "dbmate"]).refused(
        "missing file",
        &["version(s) 20240105000000 applied", "no migration file"],
    );
    refused_cleanly(&db, "missing file").await;

    // No such table: says which one and how to name another; --from-table reads that one.
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let dir = scratch_dir();
    write_files(dir.path(), Files::Plain, &SEQ);
    run(&db, dir.path(), &["baseline", "--from", "golang-migrate"]).refused(
        "no table",
        &["`schema_migrations` does not exist", "--from-table"],
    );
    run(
        &db,
        dir.path(),
        &[
            "baseline",
            "--from",
            "golang-migrate",
            "--from-table",
            "bad name",
        ],
    )
    .refused("bad table name", &["--from-table `bad name`"]);
    db.execute(&history_sql(
        "golang-migrate",
        server,
        "app_versions",
        &[1],
        false,
    ))
    .await;
    db.execute("CREATE TABLE adopt_t1 (id INT)").await;
    let ran = run(
        &db,
        dir.path(),
        &[
            "--output",
            "json",
            "baseline",
            "--from",
            "golang-migrate",
            "--from-table",
            "app_versions",
        ],
    );
    assert_eq!(
        versions(&ran.ok("--from-table").json(), "recorded"),
        vec![1]
    );
    // The second adoption is refused.
    run(
        &db,
        dir.path(),
        &[
            "baseline",
            "--from",
            "golang-migrate",
            "--from-table",
            "app_versions",
        ],
    )
    .refused("second", &["already has 1 record(s)"]);
}

#[tokio::test]
async fn every_refusal_on_postgres() {
    every_refusal(Server::Postgres).await;
}

#[tokio::test]
async fn every_refusal_on_mariadb() {
    every_refusal(Server::Mysql).await;
}

/// Each layout's files, applied and rolled back for real.
async fn every_layout_applies_and_rolls_back(server: Server) {
    for (files, spelled) in [
        (Files::Plain, TS),
        (Files::Dbmate, TS),
        (Files::Goose, SEQ),
        (Files::Diesel, TS),
        (Files::Flyway, SEQ),
    ] {
        let Some(db) = TestDb::create(server).await else {
            return;
        };
        let context = format!("{files:?} on {}", server.name());
        let dir = scratch_dir();
        write_files(dir.path(), files, &spelled);
        let migrated = run(&db, dir.path(), &["--output", "json", "migrate"]);
        assert_eq!(
            versions(&migrated.ok(&context).json(), "applied"),
            spelled,
            "{context}"
        );
        let tables = db.tables().await;
        assert!(
            (1..=3).all(|n| tables.contains(&format!("adopt_t{n}"))),
            "{context}: {tables:?}"
        );
        let reverted = run(&db, dir.path(), &["--output", "json", "rollback", "--all"]);
        let mut expected = spelled.to_vec();
        expected.reverse();
        assert_eq!(
            versions(&reverted.ok(&context).json(), "reverted"),
            expected,
            "{context}"
        );
        let tables = db.tables().await;
        assert!(
            !tables.iter().any(|t| t.starts_with("adopt_t")),
            "{context}: {tables:?}"
        );
        assert!(db.history().await.is_empty(), "{context}");
    }
}

#[tokio::test]
async fn every_layout_applies_and_rolls_back_on_postgres() {
    every_layout_applies_and_rolls_back(Server::Postgres).await;
}

#[tokio::test]
async fn every_layout_applies_and_rolls_back_on_mariadb() {
    every_layout_applies_and_rolls_back(Server::Mysql).await;
}

/// Flyway's repeatable migrations (`R__`, rows without a version): one whose latest run
/// succeeded with the text its file has now is recorded as applied, so switching does not
/// apply it again; an edited one, or one whose latest run failed, is left for `migrate`, as
/// Flyway would apply it. The checksums below are Flyway's (a CRC-32 of the lines without
/// their endings, as a signed integer), computed with Python's `zlib.crc32`.
async fn flyway_repeatables_are_adopted_when_unchanged(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let dir = scratch_dir();
    write_files(dir.path(), Files::Flyway, &[1]);
    let repeatable = |name: &str, value: i64| {
        let text = format!("INSERT INTO adopt_t1 VALUES ({value});\n");
        std::fs::write(dir.path().join(format!("R__{name}.sql")), text).unwrap();
    };
    repeatable("same", 1);
    repeatable("edited", 2);
    repeatable("failed", 3);
    db.execute("CREATE TABLE adopt_t1 (id INT)").await;
    let table = "flyway_schema_history";
    db.execute(&history_sql("flyway", server, table, &[1], false))
        .await;
    let success = if server == Server::Postgres {
        ["TRUE", "FALSE"]
    } else {
        ["1", "0"]
    };
    for (rank, script, checksum, ok) in [
        (10, "R__same.sql", -1418276834, success[0]),
        (11, "R__edited.sql", -535098664, success[0]),
        (12, "R__failed.sql", -1460534160, success[1]),
    ] {
        db.execute(&format!(
            "INSERT INTO {table} (installed_rank, version, description, type, script, checksum, \
             installed_by, execution_time, success) VALUES ({rank}, NULL, 'r', 'SQL', \
             '{script}', {checksum}, 'app', 1, {ok})"
        ))
        .await;
    }
    let context = format!("flyway repeatables on {}", server.name());
    let adopted = run(&db, dir.path(), &["baseline", "--from", "flyway"]);
    adopted.ok(&context);
    assert!(
        adopted
            .stdout
            .contains("recorded as applied (not run) R__same (repeatable")
            && !adopted.stdout.contains("R__edited")
            && !adopted.stdout.contains("R__failed"),
        "{context}: {}",
        adopted.stdout
    );
    let migrated = run(&db, dir.path(), &["migrate"]);
    migrated.ok(&context);
    let mut rows = db
        .strings("SELECT CAST(id AS CHAR(10)) FROM adopt_t1")
        .await;
    rows = rows.iter().map(|r| r.trim().to_string()).collect();
    rows.sort();
    assert_eq!(rows, ["2", "3"], "{context}: {}", migrated.stdout);
}

#[tokio::test]
async fn flyway_repeatables_are_adopted_when_unchanged_on_postgres() {
    flyway_repeatables_are_adopted_when_unchanged(Server::Postgres).await;
}

#[tokio::test]
async fn flyway_repeatables_are_adopted_when_unchanged_on_mariadb() {
    flyway_repeatables_are_adopted_when_unchanged(Server::Mysql).await;
}
