//! A fleet's targets, as issue 32 (part 4) asks, on PostgreSQL and MariaDB: a `--schemas`
//! target sees `public` after its own schema (`[fleet] search_path`, `--search-path`) and
//! still creates in its own; `--targets-sql` is one query run read-only, and a write in it is
//! refused with nothing changed; `--no-fleet` runs the one database whatever `[fleet]` in
//! dirthara.toml says, keeping its other settings; `--canary` takes names; a bad line of a
//! targets file is named by its line.

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::servers::{Server, TestDb};
use support::{dirthara, dirthara_command, scratch_dir, text, Migrations};

crate::scenario_tests! {
    postgres => Server::Postgres => [
        targets_sql_is_one_query_run_read_only_and_a_write_changes_nothing,
        no_fleet_runs_the_one_database_whatever_dirthara_toml_says,
        the_canary_may_be_named,
    ],
    mariadb => Server::Mysql => [
        targets_sql_is_one_query_run_read_only_and_a_write_changes_nothing,
        no_fleet_runs_the_one_database_whatever_dirthara_toml_says,
        the_canary_may_be_named,
    ],
}

fn failed_with(out: &Output, code: i32, needles: &[&str]) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(code), "{stdout}\n{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "`{needle}` not in: {stderr}");
    }
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", text(out)))
}

/// Each target's outcome in a `--output json` fleet report.
fn outcomes(report: &Value) -> Vec<(String, String)> {
    (report["targets"].as_array().unwrap().iter())
        .map(|t| {
            let field = |k: &str| t[k].as_str().unwrap().to_string();
            (field("name"), field("outcome"))
        })
        .collect()
}

#[tokio::test]
async fn a_schemas_target_sees_public_after_its_own_schema_and_creates_in_its_own() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    db.execute(
        "CREATE DOMAIN public.email AS text CHECK (VALUE LIKE '%@%'); \
         CREATE SCHEMA extensions; CREATE DOMAIN extensions.money_cents AS bigint; \
         CREATE SCHEMA tenant_a; CREATE SCHEMA tenant_b",
    )
    .await;
    let m = Migrations::new();
    m.add(
        1,
        "contacts",
        "CREATE TABLE contacts (id INT, mail email)",
        None,
    );
    let run = dirthara(&db.url, m.path(), &["--schemas", "tenant_*", "migrate"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    // The table, a type from `public` in it, and each history (and its schema snapshot) in the
    // tenant's schema; none in public.
    let tables = db
        .strings(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables \
             WHERE table_schema IN ('public', 'tenant_a', 'tenant_b') ORDER BY 1",
        )
        .await;
    assert_eq!(
        tables,
        [
            "tenant_a.contacts",
            "tenant_a.dirthara_migrations",
            "tenant_a.dirthara_migrations_meta",
            "tenant_a.dirthara_migrations_schema",
            "tenant_b.contacts",
            "tenant_b.dirthara_migrations",
            "tenant_b.dirthara_migrations_meta",
            "tenant_b.dirthara_migrations_schema",
        ],
        "{tables:?}"
    );

    // `[fleet] search_path` in dirthara.toml adds a schema of shared types.
    let project = scratch_dir();
    std::fs::write(
        project.path().join("dirthara.toml"),
        "[fleet]\nschemas = \"tenant_*\"\nsearch_path = \"{target}, public, extensions\"\n",
    )
    .unwrap();
    m.add(
        2,
        "ledger",
        "CREATE TABLE ledger (amount money_cents, mail email)",
        None,
    );
    let run = dirthara(&db.url, m.path(), &["migrate"])
        .current_dir(project.path())
        .output()
        .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    let ledgers = db
        .strings("SELECT table_schema FROM information_schema.tables WHERE table_name = 'ledger' ORDER BY 1")
        .await;
    assert_eq!(ledgers, ["tenant_a", "tenant_b"]);

    // `--search-path {target}` is the tenant alone: the shared type is then not found.
    m.add(3, "more", "CREATE TABLE more_mail (mail email)", None);
    let alone = dirthara(
        &db.url,
        m.path(),
        &[
            "--schemas",
            "tenant_a",
            "--search-path",
            "{target}",
            "migrate",
        ],
    )
    .output()
    .unwrap();
    failed_with(&alone, 1, &["type \"email\" does not exist"]);
    // A search_path that does not put the target first is refused, naming the flag.
    let refused = dirthara(
        &db.url,
        m.path(),
        &[
            "--schemas",
            "tenant_a",
            "--search-path",
            "public, {target}",
            "migrate",
        ],
    )
    .output()
    .unwrap();
    failed_with(
        &refused,
        2,
        &["--search-path", "does not start with {target}"],
    );
}

async fn targets_sql_is_one_query_run_read_only_and_a_write_changes_nothing(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let tenant = db.sibling("tenant").await;
    db.execute("CREATE TABLE tenants (name VARCHAR(64), url VARCHAR(255))")
        .await;
    db.execute("CREATE TABLE audit (what VARCHAR(64))").await;
    db.execute("INSERT INTO audit VALUES ('kept')").await;
    db.execute(&format!(
        "INSERT INTO tenants VALUES ('acme', '{}')",
        tenant.url
    ))
    .await;
    // A write hidden in a query, which only the read-only transaction stops.
    let hidden = match server {
        Server::Postgres => {
            "WITH gone AS (DELETE FROM tenants RETURNING name, url) SELECT * FROM gone".to_string()
        }
        _ => {
            // (A function may not write the table its query reads: it writes another.)
            db.execute(
                "CREATE FUNCTION forget() RETURNS VARCHAR(8) MODIFIES SQL DATA \
                 BEGIN DELETE FROM audit; RETURN ''; END",
            )
            .await;
            "SELECT name, CONCAT(url, forget()) FROM tenants".to_string()
        }
    };
    let m = Migrations::tables(1);
    let cases: [(&str, &[&str]); 4] = [
        (
            "DELETE FROM tenants RETURNING name, url",
            &["is a DELETE statement", "nothing ran"],
        ),
        ("DROP TABLE tenants", &["is a DROP statement"]),
        (
            &hidden,
            &["failed on `default`", "in a read-only transaction"],
        ),
        (
            "SELECT name, url FROM tenants; SELECT 2",
            &["must be one statement", "has 2"],
        ),
    ];
    for (sql, needles) in cases {
        for command in [&["status"][..], &["wait", "--timeout", "5s"], &["migrate"]] {
            let mut args = vec!["--targets-sql", sql];
            args.extend_from_slice(command);
            let out = dirthara(&db.url, m.path(), &args).output().unwrap();
            let mut all = vec!["Error [CONFIG_ERROR]:", "--targets-sql", "targets_sql"];
            all.extend_from_slice(needles);
            failed_with(&out, 1, &all);
            assert_eq!(
                db.strings("SELECT name FROM tenants").await,
                ["acme"],
                "{args:?} changed the tenants table"
            );
            assert_eq!(
                db.strings("SELECT what FROM audit").await,
                ["kept"],
                "{args:?}"
            );
        }
    }
    // The query as it should be runs the fleet, and leaves the session as it was.
    let out = dirthara(
        &db.url,
        m.path(),
        &[
            "--targets-sql",
            "SELECT name, url FROM tenants;",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(outcomes(&json(&out)), [("acme".into(), "applied".into())]);
    assert_eq!(tenant.history().await.len(), 1);
}

/// A project whose dirthara.toml names a fleet (a targets file of one tenant database) and a
/// history table of its own.
fn fleet_project(tenant: &TestDb) -> tempfile::TempDir {
    let project = scratch_dir();
    std::fs::write(
        project.path().join("tenants.txt"),
        format!("tenant {}\n", tenant.url),
    )
    .unwrap();
    std::fs::write(
        project.path().join("dirthara.toml"),
        "history_table = \"app_history\"\n\n[fleet]\ntargets = \"tenants.txt\"\n",
    )
    .unwrap();
    project
}

fn in_project(project: &Path, url: &str, m: &Migrations, args: &[&str]) -> Output {
    dirthara(url, m.path(), args)
        .current_dir(project)
        .output()
        .unwrap()
}

async fn no_fleet_runs_the_one_database_whatever_dirthara_toml_says(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let tenant = db.sibling("tenant").await;
    let project = fleet_project(&tenant);
    let m = Migrations::tables(1);
    // Without --no-fleet, -d lists nothing: the fleet runs, and unlock is refused with advice
    // that can be followed.
    let unlock = in_project(project.path(), &db.url, &m, &["unlock", "--force"]);
    failed_with(
        &unlock,
        1,
        &["does not run over a fleet", "--no-fleet -d URL"],
    );

    let run = in_project(project.path(), &db.url, &m, &["--no-fleet", "migrate"]);
    assert!(run.status.success(), "{:?}", text(&run));
    // The one database, with the file's other settings (its history table); the tenant of
    // the fleet untouched.
    let tables = db.tables().await;
    assert!(
        tables.contains(&"app_history".to_string()) && tables.contains(&"t1".to_string()),
        "{tables:?}"
    );
    assert!(
        !tables.contains(&"dirthara_migrations".to_string()),
        "{tables:?}"
    );
    assert!(
        tenant.tables().await.is_empty(),
        "{:?}",
        tenant.tables().await
    );
    let status = in_project(project.path(), &db.url, &m, &["--no-fleet", "status"]);
    assert!(status.status.success(), "{:?}", text(&status));
    let unlock = in_project(
        project.path(),
        &db.url,
        &m,
        &["--no-fleet", "unlock", "--force"],
    );
    assert!(unlock.status.success(), "{:?}", text(&unlock));

    // The fleet itself still runs as configured; --no-fleet with a source is a usage error.
    let fleet = in_project(project.path(), &db.url, &m, &["migrate"]);
    assert!(fleet.status.success(), "{:?}", text(&fleet));
    assert!(tenant.tables().await.contains(&"app_history".to_string()));
    let both = in_project(
        project.path(),
        &db.url,
        &m,
        &["--no-fleet", "--targets", "tenants.txt", "migrate"],
    );
    failed_with(&both, 2, &["--no-fleet", "--targets"]);
}

async fn the_canary_may_be_named(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let names = ["tenant_a", "tenant_b", "tenant_c"];
    let mut tenants = Vec::new();
    for name in names {
        tenants.push(db.sibling(name).await);
    }
    let dir = scratch_dir();
    let file = dir.path().join("tenants.txt");
    let lines: Vec<String> = (names.iter().zip(&tenants))
        .map(|(name, t)| format!("{name} {}", t.url))
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let file = file.display().to_string();
    // The first tenant by name is broken for good: a canary of one by count is always it.
    tenants[0].execute("CREATE TABLE t1 (id INT)").await;
    let m = Migrations::tables(1);
    let fleet = |canary: &str| {
        // One at a time, so what runs first is known.
        let args = [
            "--targets",
            &file,
            "--jobs",
            "1",
            "--canary",
            canary,
            "migrate",
            "--output",
            "json",
        ];
        dirthara(&db.url, m.path(), &args).output().unwrap()
    };

    // A name that is no target: an error naming it and the nearest, before anything runs.
    let out = fleet("tenant_c,tenant_bb");
    failed_with(
        &out,
        1,
        &[
            "Error [CONFIG_ERROR]:",
            "--canary: `tenant_bb` is not a target",
            "did you mean `tenant_b`?",
        ],
    );
    assert!(tenants[2].tables().await.is_empty());

    let by_count = fleet("1");
    assert_eq!(by_count.status.code(), Some(1), "{:?}", text(&by_count));
    let outcomes_by_count = outcomes(&json(&by_count));
    assert_eq!(outcomes_by_count[0], ("tenant_a".into(), "failed".into()));
    assert_eq!(outcomes_by_count[2], ("tenant_c".into(), "skipped".into()));
    assert!(tenants[2].tables().await.is_empty());

    // Named, the canary runs first and the rest after it: tenant_a still fails there, and
    // stops the starting (tenant_b is skipped), but tenant_c was migrated before it.
    let by_name = fleet("tenant_c");
    assert_eq!(by_name.status.code(), Some(1), "{:?}", text(&by_name));
    let report = outcomes(&json(&by_name));
    let expected: Vec<(String, String)> = [
        ("tenant_a", "failed"),
        ("tenant_b", "skipped"),
        ("tenant_c", "applied"),
    ]
    .map(|(n, o)| (n.to_string(), o.to_string()))
    .into();
    assert_eq!(report, expected);
    assert_eq!(tenants[2].history().await.len(), 1);
}

#[test]
fn a_bad_line_of_a_targets_file_is_named_by_its_line() {
    let dir = scratch_dir();
    let file = dir.path().join("tenants.txt");
    let m = Migrations::tables(1);
    let cases = [
        (
            "# tenants\nacme sqlite:a.db\n\nglobex sqlite:b.db extra\n",
            ":4: expected `name url` or `url`, found 3 words",
        ),
        (
            "acme sqlite:a.db\n# next\nglobex oracle://h/g\n",
            ":3: target `globex`",
        ),
        (
            "acme sqlite:a.db\nacme sqlite:b.db\n",
            ":2: two targets are named `acme` (the first is on line 1)",
        ),
    ];
    for (text_of_file, needle) in cases {
        std::fs::write(&file, text_of_file).unwrap();
        let out = dirthara_command()
            .arg("--dir")
            .arg(m.path())
            .args(["--targets", &file.display().to_string(), "status"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let expected = format!("--targets {}{needle}", file.display());
        failed_with(&out, 1, &["Error [CONFIG_ERROR]:", &expected]);
    }
}
