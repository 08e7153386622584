//! Switching from another tool, against real servers: `baseline --from <tool>` reads each
//! tool's history table as that tool writes it (DDL and rows taken from each tool's source,
//! written here by hand), records what it applied, and `migrate` then applies only the
//! newer files. Every refusal, and each layout's files applied and rolled back for real.
//! Every fixture here is written for this project.

mod servers;

use std::path::Path;

use servers::{dirthara, text, Server, TestDb};

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

/// How each tool lays out its files here; migration `i` creates table `adopt_t<i>`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Files {
    Plain,
    Dbmate,
    Goose,
    Diesel,
    Flyway,
    /// refinery's `V<n>__<name>.sql`, without undo files.
    Refinery,
}

fn write_files(dir: &Path, files: Files, versions: &[i64]) {
    for (i, v) in versions.iter().enumerate() {
        let n = i + 1;
        let (up, down) = (
            format!("CREATE TABLE adopt_t{n} (id INT);\n"),
            format!("DROP TABLE adopt_t{n};\n"),
        );
        let name = format!("create_t{n}");
        let write = |rel: String, text: String| {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        match files {
            Files::Plain => {
                write(format!("{v}_{name}.up.sql"), up);
                write(format!("{v}_{name}.down.sql"), down);
            }
            Files::Dbmate => write(
                format!("{v}_{name}.sql"),
                format!("-- migrate:up\n{up}\n-- migrate:down\n{down}"),
            ),
            Files::Goose => write(
                format!("{v}_{name}.sql"),
                format!("-- +goose Up\n{up}\n-- +goose Down\n{down}"),
            ),
            Files::Diesel => {
                let t = v.to_string();
                let folder = format!("{}-{}-{}-{}_{name}", &t[..4], &t[4..6], &t[6..8], &t[8..]);
                write(format!("{folder}/up.sql"), up);
                write(format!("{folder}/down.sql"), down);
            }
            Files::Flyway => {
                write(format!("V{v}__{name}.sql"), up);
                write(format!("U{v}__{name}.sql"), down);
            }
            Files::Refinery => write(format!("V{v}__{name}.sql"), up),
        }
    }
}

/// One tool: its files, and its history table with migrations 1 and 2 (of 3) applied,
/// written as the tool writes it on `server`.
struct Tool {
    name: &'static str,
    table: &'static str,
    files: Files,
    versions: [i64; 3],
}

const TS: [i64; 3] = [20240101000001, 20240101000002, 20240101000003];
const SEQ: [i64; 3] = [1, 2, 3];

fn tools() -> Vec<Tool> {
    let tool = |name, table, files, versions| Tool {
        name,
        table,
        files,
        versions,
    };
    vec![
        tool("sqlx", "_sqlx_migrations", Files::Plain, TS),
        tool("golang-migrate", "schema_migrations", Files::Plain, SEQ),
        tool("dbmate", "schema_migrations", Files::Dbmate, TS),
        tool("goose", "goose_db_version", Files::Goose, SEQ),
        tool("refinery", "refinery_schema_history", Files::Refinery, SEQ),
        tool("diesel", "__diesel_schema_migrations", Files::Diesel, TS),
        tool("flyway", "flyway_schema_history", Files::Flyway, SEQ),
    ]
}

/// The tool's table and rows for `applied` (each row marked good unless `failed`).
fn history_sql(tool: &str, server: Server, table: &str, applied: &[i64], failed: bool) -> String {
    let pg = server == Server::Postgres;
    let ok = if failed { "FALSE" } else { "TRUE" };
    let mut sql = Vec::new();
    match tool {
        "sqlx" => {
            // sqlx-postgres / sqlx-mysql `ensure_migrations_table`; checksum: SHA-384 bytes.
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
                 installed_on {} NOT NULL DEFAULT {}, success BOOLEAN NOT NULL, checksum {} NOT NULL, \
                 execution_time BIGINT NOT NULL)",
                if pg { "TIMESTAMPTZ" } else { "TIMESTAMP" },
                if pg { "now()" } else { "CURRENT_TIMESTAMP" },
                if pg { "BYTEA" } else { "BLOB" },
            ));
            let checksum = if pg {
                "decode('a1b2c3', 'hex')"
            } else {
                "X'a1b2c3'"
            };
            for (i, v) in applied.iter().enumerate() {
                let success = if i + 1 == applied.len() { ok } else { "TRUE" };
                sql.push(format!(
                    "INSERT INTO {table} (version, description, success, checksum, execution_time) \
                     VALUES ({v}, 'create t{}', {success}, {checksum}, 1234567)",
                    i + 1
                ));
            }
        }
        "golang-migrate" => {
            // database/postgres and database/mysql: one row, the newest version.
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version bigint not null primary key, dirty boolean not null)"
            ));
            if let Some(v) = applied.last() {
                sql.push(format!(
                    "INSERT INTO {table} (version, dirty) VALUES ({v}, {})",
                    if failed { "TRUE" } else { "FALSE" }
                ));
            }
        }
        "dbmate" => {
            sql.push(format!(
                "create table if not exists {table} (version varchar(128) primary key){}",
                if pg {
                    ""
                } else {
                    " character set latin1 collate latin1_bin"
                }
            ));
            for v in applied {
                sql.push(format!("insert into {table} (version) values ('{v}')"));
            }
        }
        "goose" => {
            // goose writes version 0 when it creates the table, then a row per up and down.
            sql.push(format!(
                "CREATE TABLE {table} (id serial NOT NULL, version_id bigint NOT NULL, \
                 is_applied boolean NOT NULL, tstamp timestamp NULL default now(), PRIMARY KEY(id))"
            ));
            sql.push(format!(
                "INSERT INTO {table} (version_id, is_applied) VALUES (0, TRUE)"
            ));
            for v in applied {
                sql.push(format!(
                    "INSERT INTO {table} (version_id, is_applied) VALUES ({v}, TRUE)"
                ));
            }
            // Migration 3 went up and came down again: not applied.
            sql.push(format!(
                "INSERT INTO {table} (version_id, is_applied) VALUES (3, TRUE)"
            ));
            sql.push(format!(
                "INSERT INTO {table} (version_id, is_applied) VALUES (3, FALSE)"
            ));
        }
        "refinery" => {
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version {} PRIMARY KEY, name VARCHAR(255), \
                 applied_on VARCHAR(255), checksum VARCHAR(255))",
                if pg { "INT4" } else { "INT" }
            ));
            for (i, v) in applied.iter().enumerate() {
                sql.push(format!(
                    "INSERT INTO {table} (version, name, applied_on, checksum) VALUES \
                     ({v}, 'create_t{}', '2024-01-01T00:00:00Z', '8150931219553470613')",
                    i + 1
                ));
            }
        }
        "diesel" => {
            sql.push(format!(
                "CREATE TABLE IF NOT EXISTS {table} (version VARCHAR(50) PRIMARY KEY NOT NULL, \
                 run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
            ));
            for v in applied {
                sql.push(format!("INSERT INTO {table} (version) VALUES ('{v}')"));
            }
        }
        "flyway" => {
            sql.push(format!(
                "CREATE TABLE {table} (installed_rank INT NOT NULL, version VARCHAR(50), \
                 description VARCHAR(200) NOT NULL, type VARCHAR(20) NOT NULL, script VARCHAR(1000) NOT NULL, \
                 checksum INT, installed_by VARCHAR(100) NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT {}, \
                 execution_time INT NOT NULL, success {} NOT NULL, PRIMARY KEY (installed_rank)){}",
                if pg { "now()" } else { "CURRENT_TIMESTAMP" },
                if pg { "BOOLEAN" } else { "BOOL" },
                if pg { "" } else { " ENGINE=InnoDB" }
            ));
            sql.push(format!("CREATE INDEX {table}_s_idx ON {table} (success)"));
            let row = |rank: usize,
                       version: &str,
                       description: &str,
                       kind: &str,
                       script: &str,
                       success: &str| {
                format!(
                    "INSERT INTO {table} (installed_rank, version, description, type, script, checksum, \
                     installed_by, execution_time, success) VALUES ({rank}, {version}, '{description}', \
                     '{kind}', '{script}', 1234, 'app', 12, {success})"
                )
            };
            sql.push(row(
                0,
                "'0'",
                "<< Flyway Schema Creation >>",
                "SCHEMA",
                "\"public\"",
                "TRUE",
            ));
            for (i, v) in applied.iter().enumerate() {
                let success = if i + 1 == applied.len() { ok } else { "TRUE" };
                let script = format!("V{v}__create_t{}.sql", i + 1);
                sql.push(row(
                    i + 1,
                    &format!("'{v}'"),
                    "create t",
                    "SQL",
                    &script,
                    success,
                ));
            }
            // A repeatable migration: no version, not a versioned migration.
            sql.push(row(
                applied.len() + 1,
                "NULL",
                "views",
                "SQL",
                "R__views.sql",
                "TRUE",
            ));
        }
        other => panic!("no history for {other}"),
    }
    sql.join(";\n")
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
        let dir = tempfile::tempdir().unwrap();
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
        let dir = tempfile::tempdir().unwrap();
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
    let dir = tempfile::tempdir().unwrap();
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
    let dir = tempfile::tempdir().unwrap();
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
        let dir = tempfile::tempdir().unwrap();
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
