//! `dirthara lint`: offline it needs no database and judges by the oldest supported server;
//! with `-d` it reads the live server's version and each flagged table's size. It writes
//! findings for people, as one JSON document, as GitHub Actions annotations or as SARIF, and
//! exits 1 only when a finding is not allowed. On the real servers every PostgreSQL rule flags
//! its statement and leaves its safe form alone, and on MariaDB a copying `ALTER` is flagged
//! where an instant `ADD COLUMN` is not.

mod support;

use support::servers::{Server, TestDb};
use support::{dirthara, dirthara_command, text, Migrations};

/// `dirthara lint --dir <m> <args>` with no database at all.
fn lint_offline(m: &Migrations, args: &[&str]) -> std::process::Output {
    dirthara_command()
        .arg("--dir")
        .arg(m.path())
        .arg("lint")
        .args(args)
        .output()
        .unwrap()
}

fn json_findings(stdout: &str) -> Vec<serde_json::Value> {
    let document: serde_json::Value =
        serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    document["findings"].as_array().unwrap().clone()
}

fn a_risky_project() -> Migrations {
    let m = Migrations::new();
    m.add(
        1,
        "widen",
        "-- widen the counter\nALTER TABLE orders ALTER COLUMN n TYPE bigint;\n",
        None,
    );
    m.add(
        2,
        "drop_legacy",
        "ALTER TABLE orders DROP COLUMN legacy;",
        None,
    );
    m.add(
        3,
        "new_table",
        "CREATE TABLE events (id int);\nCREATE INDEX events_id ON events (id);",
        None,
    );
    m
}

#[test]
fn offline_lint_needs_no_database_and_exits_1_on_a_finding_not_allowed() {
    let m = a_risky_project();
    let out = lint_offline(&m, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1_widen.sql:2:33:") && stdout.contains("[changing-column-type]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fix: add a column of the new type"),
        "{stdout}"
    );
    assert!(stdout.contains("[dropping-column]"), "{stdout}");
    // A table created in the same migration is never flagged.
    assert!(!stdout.contains("events"), "{stdout}");
    assert!(
        stdout.contains("2 finding(s) in 3 migration(s)") && stdout.contains("1 not allowed"),
        "{stdout}"
    );
    assert!(stderr.contains("Error [BLOCKING_DDL]"), "{stderr}");

    // JSON: every field the issue names, one document.
    let out = lint_offline(&m, &["--output", "json"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    let findings = json_findings(&stdout);
    let widen = &findings[0];
    for field in [
        "file", "line", "column", "rule", "severity", "table", "message", "fix",
    ] {
        assert!(!widen[field].is_null(), "{field}: {widen}");
    }
    assert_eq!(widen["rule"], "changing-column-type");
    assert_eq!(widen["table"], "orders");
    assert_eq!(widen["line"], 2);
    assert_eq!(widen["refuses"], true);
    assert_eq!(findings[1]["rule"], "dropping-column");
    assert_eq!(findings[1]["severity"], "warning");
    assert_eq!(findings[1]["refuses"], false);

    // A warning alone does not fail the lint.
    let only_warning = Migrations::new();
    only_warning.add(1, "drop", "ALTER TABLE orders DROP COLUMN legacy;", None);
    let out = lint_offline(&only_warning, &[]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    // A rule switched off by name is not applied.
    let out = lint_offline(&m, &["--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let out = dirthara_command()
        .env("DIRTHARA_LINT_DISABLE", "changing-column-type")
        .arg("--dir")
        .arg(m.path())
        .args(["lint", "--output", "json"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let rules: Vec<_> = json_findings(&stdout)
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rules, ["dropping-column"]);
}

#[test]
fn lint_writes_github_annotations_and_sarif() {
    let m = a_risky_project();
    let out = lint_offline(&m, &["--format", "github"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let file = m.path().join("1_widen.sql");
    assert!(
        lines[0].starts_with(&format!(
            "::error file={},line=2,col=33,title=changing-column-type::",
            file.display().to_string().replace(':', "%3A")
        )),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("::warning file=") && lines[1].contains("title=dropping-column::"),
        "{stdout}"
    );

    let out = lint_offline(&m, &["--format", "sarif"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    let sarif: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "dirthara");
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{stdout}");
    assert_eq!(results[0]["ruleId"], "changing-column-type");
    assert_eq!(results[0]["level"], "error");
    let region = &results[0]["locations"][0]["physicalLocation"]["region"];
    assert_eq!(
        (region["startLine"].as_u64(), region["startColumn"].as_u64()),
        (Some(2), Some(33))
    );
    let rules: Vec<_> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rules, ["changing-column-type", "dropping-column"]);
}

#[test]
fn lint_of_no_migrations_is_an_error_not_a_clean_bill() {
    let m = Migrations::new();
    let out = lint_offline(&m, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Error [NO_MIGRATIONS]: no migrations in")
            && stderr.contains("Point --dir"),
        "{stderr}"
    );
}

#[test]
fn offline_mysql_dialect_judges_by_mysql_rules() {
    let m = Migrations::new();
    m.add(
        1,
        "widen",
        "ALTER TABLE orders MODIFY COLUMN n BIGINT;",
        None,
    );
    let out = lint_offline(&m, &["--dialect", "mysql", "--output", "json"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(json_findings(&stdout)[0]["rule"], "mysql-copying-alter");
}

/// `CONCURRENTLY` in a transaction is settled when the files are loaded, before any rule:
/// a step made only of such statements runs outside a transaction, so lint has nothing to say
/// about it, and a step mixing one with other statements is refused naming its line and the
/// marker. (`ban-concurrent-index-creation-in-transaction` is left to SQL linted as running in
/// a transaction through the library, as squawk lints it.)
#[test]
fn concurrently_in_a_transaction_is_settled_at_load_not_by_a_rule() {
    let alone = Migrations::new();
    alone.add(
        1,
        "index",
        "CREATE INDEX CONCURRENTLY big_a ON big (a);",
        None,
    );
    let out = lint_offline(&alone, &["--output", "json"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(json_findings(&stdout), Vec::<serde_json::Value>::new());

    let mixed = Migrations::new();
    mixed.add(
        1,
        "index",
        "CREATE TABLE t (a int);\nCREATE INDEX CONCURRENTLY big_a ON big (a);",
        None,
    );
    let out = lint_offline(&mixed, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Error [INVALID_MIGRATION]:")
            && stderr.contains("1_index.sql: line 2: `CREATE INDEX CONCURRENTLY`")
            && stderr.contains("`-- dirthara:no-transaction`"),
        "{stderr}"
    );
}

/// With `-d`, the live sizes: the same file passes on a small table and fails on a table
/// over `blocking_table_size`, naming its rows and bytes.
async fn live_lint_uses_the_catalog_sizes(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let (create, widen) = match server {
        Server::Postgres => (
            "CREATE TABLE big (id int PRIMARY KEY, n int, note text);\
             INSERT INTO big SELECT i, i, 'row ' || i FROM generate_series(1, 20000) i;\
             CREATE TABLE small (id int PRIMARY KEY, n int); ANALYZE big; ANALYZE small;",
            "ALTER TABLE {} ALTER COLUMN n TYPE bigint;",
        ),
        _ => (
            "CREATE TABLE small (id INT PRIMARY KEY, n INT)",
            "ALTER TABLE {} MODIFY COLUMN n BIGINT;",
        ),
    };
    db.execute(create).await;
    if server != Server::Postgres {
        // ANALYZE reads every page (about 300), not InnoDB's default sample of 20, whose row
        // estimate on Oracle MySQL ranges from half to one and a half times the truth.
        db.execute(
            "CREATE TABLE big (id INT PRIMARY KEY, n INT, note VARCHAR(40)) \
             STATS_SAMPLE_PAGES = 1000",
        )
        .await;
        // Digits crossed five times: 100,000 numbers, no recursion limit to meet.
        db.execute(
            "INSERT INTO big WITH d AS (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 \
             UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 \
             UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) \
             SELECT i, i, CONCAT('row ', i) FROM (SELECT a.n + 10 * b.n + 100 * c.n \
             + 1000 * e.n + 10000 * f.n + 1 AS i FROM d a, d b, d c, d e, d f) x \
             WHERE i <= 20000",
        )
        .await;
        db.execute("ANALYZE TABLE big, small").await;
    }
    let limit = ["--blocking-table-size", "256kB"];
    let small = Migrations::new();
    small.add(1, "widen", &widen.replace("{}", "small"), None);
    let out = dirthara(
        &db.url,
        small.path(),
        &[&["lint", "--output", "json"][..], &limit].concat(),
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let findings = json_findings(&stdout);
    assert_eq!(findings.len(), 1, "{stdout}");
    assert_eq!(findings[0]["table"], "small");
    assert!(findings[0]["bytes"].as_u64().is_some(), "{stdout}");
    assert_eq!(findings[0]["refuses"], false);

    let big = Migrations::new();
    big.add(1, "widen", &widen.replace("{}", "big"), None);
    let out = dirthara(
        &db.url,
        big.path(),
        &[&["lint", "--output", "json"][..], &limit].concat(),
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let finding = &json_findings(&stdout)[0];
    assert_eq!(finding["table"], "big");
    let rows = finding["rows"].as_u64().unwrap();
    assert!((18_000..=22_000).contains(&rows), "{stdout}");
    assert!(finding["bytes"].as_u64().unwrap() > 256 * 1024, "{stdout}");
    assert!(finding["blocking_ms"].as_u64().is_some(), "{stdout}");
    // Offline, the same file cannot know the size: it fails whatever the table holds.
    let out = dirthara(&db.url, small.path(), &["lint", "--offline"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    // Nothing was changed.
    assert!(!db
        .tables()
        .await
        .contains(&"dirthara_migrations".to_string()));
}

#[tokio::test]
async fn postgres_live_lint_uses_the_catalog_sizes() {
    live_lint_uses_the_catalog_sizes(Server::Postgres).await;
}

#[tokio::test]
async fn mariadb_live_lint_uses_the_catalog_sizes() {
    live_lint_uses_the_catalog_sizes(Server::Mysql).await;
}

/// Oracle MySQL 8+ answers `information_schema.TABLES` from a cache kept a day by default
/// (`information_schema_stats_expiry`): read once while the table was empty, it would tell
/// the lint the table is still empty after it has grown. The lint's sizes are the live ones.
#[tokio::test]
async fn mysql_live_lint_sees_a_table_grown_since_the_catalog_was_last_read() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    db.execute("CREATE TABLE big (id INT PRIMARY KEY, n INT, note VARCHAR(40))")
        .await;
    // Read while empty: Oracle MySQL caches these numbers.
    let cached = db
        .strings(
            "SELECT CAST(TABLE_ROWS AS CHAR) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'big'",
        )
        .await;
    assert_eq!(cached, ["0"]);
    db.execute(
        "INSERT INTO big WITH d AS (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 \
         UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 \
         UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) \
         SELECT i, i, CONCAT('row ', i) FROM (SELECT a.n + 10 * b.n + 100 * c.n \
         + 1000 * e.n + 10000 * f.n + 1 AS i FROM d a, d b, d c, d e, d f) x \
         WHERE i <= 20000",
    )
    .await;
    let m = Migrations::new();
    m.add(1, "widen", "ALTER TABLE big MODIFY COLUMN n BIGINT;", None);
    let out = dirthara(&db.url, m.path(), &["lint", "--output", "json"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    let findings = json_findings(&stdout);
    assert_eq!(findings.len(), 1, "{stdout}\n{stderr}");
    // Without ANALYZE the row count is InnoDB's running one: about right, never the cached 0.
    let rows = findings[0]["rows"].as_u64().unwrap_or(0);
    assert!(rows >= 10_000, "{stdout}");
}

/// The tables every rule's statements touch, so the live server could run the safe forms.
const POSTGRES_TABLES: &str = "CREATE TABLE other (id int PRIMARY KEY);\
    CREATE TABLE big (id int, n int, a int, b int, u int, legacy text);\
    CREATE UNIQUE INDEX big_u_idx ON big (u);";

/// Each rule: a file that breaks it, and files with its safe form.
const POSTGRES_CASES: &[(&str, &str, &[&str])] = &[
    (
        "changing-column-type",
        "ALTER TABLE big ALTER COLUMN n TYPE bigint;",
        &["ALTER TABLE big ADD COLUMN n2 bigint;"],
    ),
    (
        "adding-field-with-default",
        "ALTER TABLE big ADD COLUMN r float8 DEFAULT random();",
        &["ALTER TABLE big ADD COLUMN status text NOT NULL DEFAULT 'new';"],
    ),
    (
        "adding-not-nullable-field",
        "ALTER TABLE big ADD COLUMN x int NOT NULL;",
        &["ALTER TABLE big ADD COLUMN x int NOT NULL DEFAULT 0;"],
    ),
    (
        "setting-not-nullable-field",
        "ALTER TABLE big ALTER COLUMN n SET NOT NULL;",
        &["ALTER TABLE big ADD CONSTRAINT n_nn CHECK (n IS NOT NULL) NOT VALID;"],
    ),
    (
        "adding-foreign-key-constraint",
        "ALTER TABLE big ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES other (id);",
        &["ALTER TABLE big ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES other (id) NOT VALID;"],
    ),
    (
        "constraint-missing-not-valid",
        "ALTER TABLE big ADD CONSTRAINT positive CHECK (n > 0);",
        &["ALTER TABLE big ADD CONSTRAINT positive CHECK (n > 0) NOT VALID;"],
    ),
    (
        "require-concurrent-index-creation",
        "CREATE INDEX big_n ON big (n);",
        &["-- dirthara:no-transaction\nCREATE INDEX CONCURRENTLY big_n ON big (n);"],
    ),
    (
        "disallowed-unique-constraint",
        "ALTER TABLE big ADD CONSTRAINT big_u UNIQUE (u);",
        &["ALTER TABLE big ADD CONSTRAINT big_u UNIQUE USING INDEX big_u_idx;"],
    ),
    (
        "adding-serial-primary-key-field",
        "ALTER TABLE big ADD COLUMN pk bigserial PRIMARY KEY;",
        &["CREATE TABLE fresh (id bigserial PRIMARY KEY);\nALTER TABLE fresh ALTER COLUMN id TYPE int;"],
    ),
    (
        "adding-generated-stored-column",
        "ALTER TABLE big ADD COLUMN total int GENERATED ALWAYS AS (a + b) STORED;",
        &["ALTER TABLE big ADD COLUMN total int;"],
    ),
    ("vacuum-full", "-- dirthara:no-transaction\nVACUUM FULL big;", &["-- dirthara:no-transaction\nVACUUM big;"]),
    ("clustering-table", "CLUSTER big USING big_u_idx;", &[]),
    ("setting-tablespace", "ALTER TABLE big SET TABLESPACE pg_default;", &[]),
    ("dropping-column", "ALTER TABLE big DROP COLUMN legacy;", &[]),
    ("renaming-column", "ALTER TABLE big RENAME COLUMN legacy TO old;", &[]),
    ("dropping-table", "DROP TABLE other CASCADE;", &[]),
    ("renaming-table", "ALTER TABLE other RENAME TO others;", &[]),
];

/// On the live server: each rule's file is flagged by that rule, and each safe form by no
/// blocking rule; and every safe form does run on this server (so it is a real one).
#[tokio::test]
async fn postgres_every_rule_flags_its_statement_and_leaves_its_safe_form_alone() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    db.execute(POSTGRES_TABLES).await;
    let m = Migrations::new();
    let mut expected = std::collections::BTreeMap::new();
    let mut version = 0;
    for (rule, flagged, safe) in POSTGRES_CASES {
        version += 1;
        m.add(
            version,
            &format!("flagged_{}", rule.replace('-', "_")),
            flagged,
            None,
        );
        expected.insert(version, Some(*rule));
        for safe in *safe {
            version += 1;
            m.add(
                version,
                &format!("safe_{}", rule.replace('-', "_")),
                safe,
                None,
            );
            expected.insert(version, None);
        }
    }
    let out = dirthara(&db.url, m.path(), &["lint", "--output", "json"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    let document: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(document["live"], true);
    assert_eq!(document["not_analysed"], serde_json::json!([]), "{stdout}");
    let findings = document["findings"].as_array().unwrap();
    for (version, rule) in &expected {
        let rules: Vec<&str> = (findings.iter())
            .filter(|f| f["version"] == *version)
            .map(|f| f["rule"].as_str().unwrap())
            .collect();
        let blocking: Vec<&str> = (findings.iter())
            .filter(|f| f["version"] == *version && f["severity"] != "warning")
            .map(|f| f["rule"].as_str().unwrap())
            .collect();
        match rule {
            Some(rule) => assert!(rules.contains(rule), "{version}: {rule} not in {rules:?}"),
            None => assert!(
                blocking.is_empty(),
                "safe form {version} flagged {blocking:?}"
            ),
        }
    }
    // Every safe form is one this server runs: each on its own fresh copy of the tables.
    for (rule, _, safe) in POSTGRES_CASES {
        for sql in *safe {
            let Some(fresh) = TestDb::create(Server::Postgres).await else {
                return;
            };
            fresh.execute(POSTGRES_TABLES).await;
            let one = Migrations::new();
            one.add(1, "safe", sql, None);
            let out = dirthara(&fresh.url, one.path(), &["migrate"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{rule}: {sql}: {:?}", text(&out));
        }
    }
}

/// MariaDB: a copying `ALTER` is flagged, an instant `ADD COLUMN` is not, on the live server.
#[tokio::test]
async fn mariadb_a_copying_alter_is_flagged_and_an_instant_add_column_is_not() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    db.execute("CREATE TABLE orders (id INT PRIMARY KEY, n INT, state VARCHAR(10))")
        .await;
    let m = Migrations::new();
    m.add(
        1,
        "widen",
        "ALTER TABLE orders MODIFY COLUMN n BIGINT;",
        None,
    );
    m.add(
        2,
        "add_note",
        "ALTER TABLE orders ADD COLUMN note TEXT NULL;",
        None,
    );
    m.add(
        3,
        "add_index",
        "ALTER TABLE orders ADD INDEX idx_state (state), ALGORITHM=INPLACE, LOCK=NONE;",
        None,
    );
    let out = dirthara(&db.url, m.path(), &["lint", "--output", "json"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    // The table is empty: the finding is said, and passes under blocking_table_size.
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let findings = json_findings(&stdout);
    let flagged: Vec<(i64, &str)> = (findings.iter())
        .map(|f| (f["version"].as_i64().unwrap(), f["rule"].as_str().unwrap()))
        .collect();
    assert_eq!(flagged, [(1, "mysql-copying-alter")], "{stdout}");
    // And the server agrees: the online forms run with the algorithm they name.
    let out = dirthara(&db.url, m.path(), &["migrate", "--allow-blocking"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    db.execute("ALTER TABLE orders ADD COLUMN extra INT NULL, ALGORITHM=INSTANT")
        .await;
}

/// The live server is the oracle: a statement a rule flags is rehearsed on an empty copy of
/// its table, and what the server runs online is no finding. Offline, the rule stands.
async fn the_server_disproves_what_it_runs_online(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let (create, online, copying) = match server {
        // A longer varchar is binary-compatible: no rewrite. int to bigint rewrites.
        Server::Postgres => (
            "CREATE TABLE orders (id int PRIMARY KEY, n int, email varchar(20))",
            "ALTER TABLE orders ALTER COLUMN email TYPE varchar(60);",
            "ALTER TABLE orders ALTER COLUMN n TYPE bigint;",
        ),
        // Under 256 bytes either way, the length prefix stays one byte: in place. INT to
        // BIGINT copies the table.
        _ => (
            "CREATE TABLE orders (id INT PRIMARY KEY, n INT, email VARCHAR(20)) \
             CHARACTER SET utf8mb4",
            "ALTER TABLE orders MODIFY COLUMN email VARCHAR(60);",
            "ALTER TABLE orders MODIFY COLUMN n BIGINT;",
        ),
    };
    db.execute(create).await;
    let m = Migrations::new();
    m.add(1, "widen_email", online, None);
    m.add(2, "widen_n", copying, None);
    let rules = |args: &[&str]| -> Vec<(i64, String)> {
        let out = dirthara(
            &db.url,
            m.path(),
            &[&["lint", "--output", "json"][..], args].concat(),
        )
        .output()
        .unwrap();
        let (stdout, stderr) = text(&out);
        let document: serde_json::Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        (document["findings"].as_array().unwrap().iter())
            .map(|f| {
                (
                    f["version"].as_i64().unwrap(),
                    f["rule"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let rule = match server {
        Server::Postgres => "changing-column-type",
        _ => "mysql-copying-alter",
    };
    assert_eq!(rules(&[]), [(2, rule.to_string())]);
    assert_eq!(
        rules(&["--offline"]),
        [(1, rule.to_string()), (2, rule.to_string())]
    );
    // The rehearsal left nothing behind.
    let tables = db.tables().await;
    assert!(
        !tables.iter().any(|t| t.starts_with("dirthara_rehearsal")),
        "{tables:?}"
    );
    assert_eq!(
        db.strings(&match server {
            Server::Postgres => "SELECT data_type::text FROM information_schema.columns \
                 WHERE table_name = 'orders' AND column_name = 'n'"
                .to_string(),
            _ => "SELECT CAST(DATA_TYPE AS CHAR) FROM information_schema.COLUMNS \
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders' AND COLUMN_NAME = 'n'"
                .to_string(),
        })
        .await,
        [match server {
            Server::Postgres => "integer",
            _ => "int",
        }]
    );
}

#[tokio::test]
async fn postgres_the_server_disproves_what_it_runs_online() {
    the_server_disproves_what_it_runs_online(Server::Postgres).await;
}

#[tokio::test]
async fn mariadb_the_server_disproves_what_it_runs_online() {
    the_server_disproves_what_it_runs_online(Server::Mysql).await;
}

/// docs/ddl-safety.md has one entry per rule (a `### <rule>` heading), and no entry for a
/// rule that does not exist.
#[test]
fn every_rule_has_its_entry_in_the_ddl_safety_page() {
    let out = dirthara_command()
        .args(["lint", "--rules", "--output", "json"])
        .output()
        .unwrap();
    let rules: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut rules: Vec<String> = (rules.as_array().unwrap().iter())
        .map(|rule| rule["name"].as_str().unwrap().to_string())
        .collect();
    let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ddl-safety.md");
    let page = std::fs::read_to_string(page).unwrap();
    let mut entries: Vec<String> = (page.lines())
        .filter_map(|line| line.strip_prefix("### "))
        .map(str::to_string)
        .collect();
    rules.sort();
    entries.sort();
    assert_eq!(entries, rules);
}
