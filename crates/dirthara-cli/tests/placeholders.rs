//! `${name}` placeholders (issue 31, part 1), on PostgreSQL, MariaDB and SQLite: a step that
//! says `-- dirthara:placeholders` has them filled in from `--placeholder`, `[placeholders]`
//! and `DIRTHARA_PLACEHOLDER_<NAME>` (the flag winning), in code only unless it says
//! `everywhere`; a step that does not opt in keeps `${…}` as written; a value with no
//! placeholder set is refused before the lock, naming file, line and name, with nothing
//! created; a changed value never makes an applied file "modified"; a secret's value is
//! masked in `preview` and in a failed step's error; a fleet target fills in its own
//! `${dirthara:schema}` and `${dirthara:target}`.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::scenarios::{Database, Place};
use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

crate::scenario_tests! {
    postgres => Database::Server(Server::Postgres) => [
        values_come_from_the_flag_the_file_and_the_environment,
        an_unset_placeholder_is_refused_before_anything_runs,
        a_secret_value_is_masked_in_preview_and_in_errors,
    ],
    mariadb => Database::Server(Server::Mysql) => [
        values_come_from_the_flag_the_file_and_the_environment,
        an_unset_placeholder_is_refused_before_anything_runs,
        a_secret_value_is_masked_in_preview_and_in_errors,
    ],
    sqlite => Database::Sqlite => [
        values_come_from_the_flag_the_file_and_the_environment,
        an_unset_placeholder_is_refused_before_anything_runs,
        a_secret_value_is_masked_in_preview_and_in_errors,
    ],
}

/// `dirthara` on `place` with `--dir` and `dirthara.toml` in `project`; SQLite runs unlocked.
fn run(place: &Place, project: &Path, args: &[&str]) -> Command {
    let mut cmd = dirthara(&place.url(), &project.join("migrations"), &[]);
    cmd.current_dir(project);
    if place.db().is_none() {
        cmd.arg("--no-lock");
    }
    cmd.args(args);
    cmd
}

fn ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// The rows of `notes` as `key=value`, ordered.
async fn notes(place: &Place) -> Vec<String> {
    match place {
        Place::Server(db) if db.server == Server::Mysql => {
            db.strings("SELECT CONCAT(k, '=', v) FROM notes ORDER BY k")
                .await
        }
        Place::Server(db) => {
            db.strings("SELECT k || '=' || v FROM notes ORDER BY k")
                .await
        }
        Place::Sqlite(dir) => {
            let sql = "SELECT k || '=' || v FROM notes ORDER BY k";
            sqlite_strings(&dir.path().join("lock.db"), sql).await
        }
    }
}

async fn tables(place: &Place) -> Vec<String> {
    match place {
        Place::Server(db) => db.tables().await,
        Place::Sqlite(dir) => {
            let sql = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name";
            sqlite_strings(&dir.path().join("lock.db"), sql).await
        }
    }
}

async fn sqlite_strings(path: &Path, sql: &str) -> Vec<String> {
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{Connection, Row};
    if !path.exists() {
        return Vec::new();
    }
    let options = SqliteConnectOptions::new().filename(path);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    let rows = sqlx::query(sql).fetch_all(&mut conn).await.unwrap();
    rows.iter().map(|row| row.get::<String, _>(0)).collect()
}

fn project() -> (tempfile::TempDir, Migrations) {
    let root = support::scratch_dir();
    let migrations = Migrations::new();
    (root, migrations)
}

/// Copies `migrations` under `root/migrations`, where [`run`] looks.
fn lay_out(root: &Path, migrations: &Migrations) {
    let to = root.join("migrations");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(migrations.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

async fn values_come_from_the_flag_the_file_and_the_environment(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let (root, m) = project();
    m.add(
        1,
        "notes",
        "CREATE TABLE notes (k VARCHAR(40), v VARCHAR(200))",
        None,
    );
    m.add(
        2,
        "named",
        "-- dirthara:placeholders\n\
         CREATE TABLE ${prefix}_users (id INT);\n\
         CREATE TABLE t_${From_Env} (id INT);\n\
         CREATE TABLE t_${from_flag} (id INT);\n\
         CREATE TABLE t_${owner} (id INT);\n\
         -- ${in_a_comment} is no placeholder here\n\
         INSERT INTO notes VALUES ('kept', '${owner}');",
        None,
    );
    m.add(
        3,
        "untouched",
        "INSERT INTO notes VALUES ('untouched', '${owner}')",
        None,
    );
    m.add(
        4,
        "everywhere",
        "-- dirthara:placeholders everywhere\n\
         INSERT INTO notes VALUES ('everywhere', '${owner}'), ('file', '${dirthara:filename}');",
        None,
    );
    lay_out(root.path(), &m);
    std::fs::write(
        root.path().join("dirthara.toml"),
        "[placeholders]\nprefix = \"shop\"\nowner = \"file_owner\"\n",
    )
    .unwrap();
    let migrate = run(
        &place,
        root.path(),
        &[
            "--placeholder",
            "from_flag=flagged",
            "--placeholder",
            "OWNER=flag_owner",
            "migrate",
        ],
    )
    .env("DIRTHARA_PLACEHOLDER_FROM_ENV", "from_env")
    .output()
    .unwrap();
    ok(&migrate);
    let found = tables(&place).await;
    for table in ["shop_users", "t_from_env", "t_flagged", "t_flag_owner"] {
        assert!(
            found.contains(&table.to_string()),
            "{table} not in {found:?}"
        );
    }
    assert_eq!(
        notes(&place).await,
        [
            "everywhere=flag_owner",
            "file=4_everywhere.sql",
            "kept=${owner}",
            "untouched=${owner}",
        ]
    );
    // Another value: the applied files are unchanged (their checksums are of the text as
    // written), so status is clean and a new run has nothing to do.
    let again = run(
        &place,
        root.path(),
        &["--placeholder", "owner=someone_else", "migrate"],
    )
    .env("DIRTHARA_PLACEHOLDER_FROM_ENV", "other")
    .env("DIRTHARA_PLACEHOLDER_FROM_FLAG", "other")
    .output()
    .unwrap();
    let stdout = ok(&again);
    assert!(stdout.contains("up to date"), "{stdout}");
    let status = run(&place, root.path(), &["--placeholder", "owner=x", "status"])
        .env("DIRTHARA_PLACEHOLDER_FROM_ENV", "other")
        .env("DIRTHARA_PLACEHOLDER_FROM_FLAG", "other")
        .output()
        .unwrap();
    let stdout = ok(&status);
    assert!(!stdout.contains("modified"), "{stdout}");
}

async fn an_unset_placeholder_is_refused_before_anything_runs(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let (root, m) = project();
    m.add(1, "first", "CREATE TABLE first_table (id INT)", None);
    m.add(
        2,
        "owned",
        "-- dirthara:placeholders\n\nCREATE TABLE ${prefix}_orders (id INT);\nCREATE TABLE t_${Missing} (id INT);",
        None,
    );
    m.add(
        3,
        "targeted",
        "-- dirthara:placeholders\nCREATE TABLE t_${dirthara:target} (id INT);",
        None,
    );
    lay_out(root.path(), &m);
    for command in [&["migrate"][..], &["preview", "migrate"], &["lint"]] {
        let out = run(&place, root.path(), &["--placeholder", "prefix=shop"])
            .args(command)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{command:?}: {stdout}\n{stderr}"
        );
        for needle in [
            "Error [PLACEHOLDER_UNSET]: 2 placeholder(s) have no value; nothing was run",
            "2_owned.sql: line 4: `${missing}` has no value; set it with \
             `--placeholder missing=VALUE`",
            "DIRTHARA_PLACEHOLDER_MISSING",
            "3_targeted.sql: line 2: `${dirthara:target}` has no value (it is a fleet \
             target's name; this run is no fleet)",
        ] {
            assert!(
                stderr.contains(needle),
                "{command:?}: `{needle}` not in {stderr}"
            );
        }
    }
    // Nothing ran, not even migration 1, and no history was created.
    assert_eq!(tables(&place).await, Vec::<String>::new());
}

async fn a_secret_value_is_masked_in_preview_and_in_errors(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let (root, m) = project();
    m.add(
        1,
        "secret",
        "-- dirthara:placeholders\nSELECT id FROM missing_${api_token};",
        None,
    );
    lay_out(root.path(), &m);
    let secret = "s3cr3tvalue";
    let flag = format!("api_token={secret}");
    let preview = run(
        &place,
        root.path(),
        &["--placeholder", &flag, "preview", "migrate"],
    )
    .output()
    .unwrap();
    let stdout = ok(&preview);
    assert!(stdout.contains("missing_****"), "{stdout}");
    let migrate = run(&place, root.path(), &["--placeholder", &flag, "migrate"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&migrate);
    assert_eq!(migrate.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("MIGRATION_FAILED"), "{stderr}");
    assert!(
        stderr.contains("missing_****"),
        "the database's words: {stderr}"
    );
    assert!(
        !stderr.contains(secret) && !stdout.contains(secret),
        "{stdout}\n{stderr}"
    );
}

/// PostgreSQL: a dollar-quoted body keeps `${…}` unless the step says `everywhere`.
#[tokio::test]
async fn a_dollar_quoted_body_keeps_its_placeholders_unless_everywhere() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "code",
        "-- dirthara:placeholders\n\
         CREATE FUNCTION ${name}() RETURNS text LANGUAGE sql AS $$ SELECT '${owner}'::text $$;",
        None,
    );
    m.add(
        2,
        "everywhere",
        "-- dirthara:placeholders everywhere\n\
         CREATE FUNCTION everywhere() RETURNS text LANGUAGE sql AS $body$ SELECT '${owner}'::text $body$;",
        None,
    );
    let out = dirthara(
        &db.url,
        m.path(),
        &[
            "--placeholder",
            "name=in_code",
            "--placeholder",
            "owner=alice",
            "migrate",
        ],
    )
    .output()
    .unwrap();
    ok(&out);
    assert_eq!(
        db.strings("SELECT in_code() UNION ALL SELECT everywhere()")
            .await,
        ["${owner}", "alice"]
    );
}

/// A `--schemas` fleet: each target fills in its own schema and name.
#[tokio::test]
async fn a_fleet_target_fills_in_its_own_schema_and_name() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    db.execute("CREATE SCHEMA tenant_a; CREATE SCHEMA tenant_b")
        .await;
    let m = Migrations::new();
    m.add(
        1,
        "marks",
        "-- dirthara:placeholders everywhere\n\
         CREATE TABLE marks (s text, t text);\n\
         INSERT INTO marks VALUES ('${dirthara:schema}', '${dirthara:target}');",
        None,
    );
    let out = dirthara(&db.url, m.path(), &["--schemas", "tenant_*", "migrate"])
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(
        db.strings(
            "SELECT s || '/' || t FROM tenant_a.marks UNION ALL SELECT s || '/' || t FROM tenant_b.marks"
        )
        .await,
        ["tenant_a/tenant_a", "tenant_b/tenant_b"]
    );
}
