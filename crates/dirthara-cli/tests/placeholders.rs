//! `${name}` placeholders (issue 31, part 1), on PostgreSQL, MariaDB and SQLite: a step that
//! says `-- dirthara:placeholders` has them filled in from `--placeholder`, `[placeholders]`
//! and `DIRTHARA_PLACEHOLDER_<NAME>` (the flag winning), in code only unless it says
//! `everywhere`; a step that does not opt in keeps `${…}` as written; a value with no
//! placeholder set is refused before the lock, naming file, line and name, with nothing
//! created; a changed value never makes an applied file "modified"; a secret's value is
//! masked in `preview` and in a failed step's error; a fleet target fills in its own
//! `${dirthara:schema}` and `${dirthara:target}`. Other tools' forms, as those tools run
//! them: goose's `-- +goose ENVSUB ON` regions take environment variables, and a directory
//! declared Flyway's has `${name}` and `${flyway:…}` filled in by default.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::scenarios::{Database, Place};
use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

crate::scenario_tests! {
    postgres => Database::Server(Server::Postgres) => [
        values_come_from_the_flag_the_file_and_the_environment,
        goose_envsub_fills_its_regions_from_the_environment,
        a_declared_flyway_directory_fills_placeholders_as_flyway_does,
        an_unset_placeholder_is_refused_before_anything_runs,
        a_secret_value_is_masked_in_preview_and_in_errors,
    ],
    mariadb => Database::Server(Server::Mysql) => [
        values_come_from_the_flag_the_file_and_the_environment,
        goose_envsub_fills_its_regions_from_the_environment,
        a_declared_flyway_directory_fills_placeholders_as_flyway_does,
        an_unset_placeholder_is_refused_before_anything_runs,
        a_secret_value_is_masked_in_preview_and_in_errors,
    ],
    sqlite => Database::Sqlite => [
        values_come_from_the_flag_the_file_and_the_environment,
        goose_envsub_fills_its_regions_from_the_environment,
        a_declared_flyway_directory_fills_placeholders_as_flyway_does,
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

/// goose's `-- +goose ENVSUB ON` to `OFF`: environment variables, in literals too, with
/// goose's defaults; an unset bare one and a `${VAR?message}` are refused before anything
/// runs, with file and line.
async fn goose_envsub_fills_its_regions_from_the_environment(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let root = support::scratch_dir();
    let dir = root.path().join("migrations");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("1_notes.sql"),
        "-- +goose Up\n\
         CREATE TABLE notes (k VARCHAR(40), v VARCHAR(200));\n\
         -- +goose ENVSUB ON\n\
         CREATE TABLE ${GOOSE_PREFIX}users (id INT);\n\
         INSERT INTO notes VALUES ('braced', '${GOOSE_OWNER}'), ('bare', '$GOOSE_OWNER'),\n\
         ('default', '${GOOSE_MISSING:-fallback}'), ('empty', '${GOOSE_MISSING-}');\n\
         -- +goose ENVSUB OFF\n\
         INSERT INTO notes VALUES ('off', '${GOOSE_OWNER}');\n\
         -- +goose Down\n\
         DROP TABLE notes;\n",
    )
    .unwrap();
    let env = [("GOOSE_PREFIX", "shop_"), ("GOOSE_OWNER", "alice")];
    let migrate = run(&place, root.path(), &["migrate"])
        .envs(env)
        .output()
        .unwrap();
    ok(&migrate);
    assert!(tables(&place).await.contains(&"shop_users".to_string()));
    assert_eq!(
        notes(&place).await,
        [
            "bare=alice",
            "braced=alice",
            "default=fallback",
            "empty=",
            "off=${GOOSE_OWNER}"
        ]
    );

    std::fs::write(
        dir.join("2_required.sql"),
        "-- +goose Up\n\
         -- +goose ENVSUB ON\n\
         CREATE TABLE ${GOOSE_UNSET}x (id INT);\n\
         CREATE TABLE y_${GOOSE_TENANT?set GOOSE_TENANT to the tenant's id} (id INT);\n",
    )
    .unwrap();
    let before = tables(&place).await;
    let refused = run(&place, root.path(), &["migrate"])
        .envs(env)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stdout}\n{stderr}");
    for needle in [
        "Error [PLACEHOLDER_UNSET]",
        "2_required.sql: line 3: `${GOOSE_UNSET}` has no value (goose `ENVSUB ON`): the \
         environment variable GOOSE_UNSET is unset; export it, or write `${GOOSE_UNSET:-}`",
        "line 4: `${GOOSE_TENANT?set GOOSE_TENANT to the tenant's id}` has no value (goose \
         `ENVSUB ON`): set GOOSE_TENANT to the tenant's id",
    ] {
        assert!(stderr.contains(needle), "`{needle}` not in {stderr}");
    }
    assert_eq!(tables(&place).await, before, "something ran");
}

/// A directory declared Flyway's: `${name}` replaced by default, anywhere (from dirthara's
/// values or Flyway's `FLYWAY_PLACEHOLDERS_*`), with Flyway's built-ins; one without a value
/// is refused in code and left as written in a string literal.
async fn a_declared_flyway_directory_fills_placeholders_as_flyway_does(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let root = support::scratch_dir();
    let dir = root.path().join("migrations");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        root.path().join("dirthara.toml"),
        "directories = [{ path = \"migrations\", format = \"flyway\" }]\n\
         [placeholders]\nowner = \"file_owner\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("V1__notes.sql"),
        "CREATE TABLE notes (k VARCHAR(40), v VARCHAR(200));\n\
         CREATE TABLE ${prefix}_items (id INT); -- ${in_a_comment}\n\
         INSERT INTO notes VALUES ('owner', '${owner}'), ('file', '${flyway:filename}'),\n\
         ('table', '${flyway:table}'), ('schema', '${flyway:defaultSchema}'),\n\
         ('kept', '${not_a_placeholder}');\n",
    )
    .unwrap();
    // A repeatable migration, as Flyway runs it: after the versioned ones, filled in too.
    std::fs::write(
        dir.join("R__schema_note.sql"),
        "DELETE FROM notes WHERE k = 'repeatable';\n\
         INSERT INTO notes VALUES ('repeatable', '${flyway:defaultSchema}');\n",
    )
    .unwrap();
    let flyway = |args: &[&str]| {
        let mut cmd = support::dirthara_command();
        cmd.current_dir(root.path()).arg("-d").arg(place.url());
        if place.db().is_none() {
            cmd.arg("--no-lock");
        }
        cmd.args(args).env("FLYWAY_PLACEHOLDERS_PREFIX", "shop");
        cmd
    };
    ok(&flyway(&["migrate"]).output().unwrap());
    assert!(tables(&place).await.contains(&"shop_items".to_string()));
    let schema = match &place {
        Place::Server(db) if db.server == Server::Mysql => db.name.clone(),
        Place::Server(_) => "public".to_string(),
        Place::Sqlite(_) => "main".to_string(),
    };
    assert_eq!(
        notes(&place).await,
        [
            "file=V1__notes.sql".to_string(),
            "kept=${not_a_placeholder}".into(),
            "owner=file_owner".into(),
            format!("repeatable={schema}"),
            format!("schema={schema}"),
            "table=dirthara_migrations".into(),
        ]
    );

    std::fs::write(
        dir.join("V2__unset.sql"),
        "CREATE TABLE t_${nowhere} (id INT);\n",
    )
    .unwrap();
    let refused = flyway(&["migrate"]).output().unwrap();
    let (stdout, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stdout}\n{stderr}");
    for needle in [
        "Error [PLACEHOLDER_UNSET]",
        "V2__unset.sql: line 1: `${nowhere}` has no value; set it with `--placeholder \
         nowhere=VALUE`",
        "(or Flyway's FLYWAY_PLACEHOLDERS_NOWHERE)",
    ] {
        assert!(stderr.contains(needle), "`{needle}` not in {stderr}");
    }
}

/// PostgreSQL: in an `ENVSUB ON` region a PL/pgSQL body's `$$` and `$tag$` stay delimiters
/// (goose would read `$tag` as a variable), and the variables inside the body are filled.
#[tokio::test]
async fn goose_envsub_keeps_dollar_quote_tags() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let dir = support::scratch_dir();
    std::fs::write(
        dir.path().join("1_fn.sql"),
        "-- +goose Up\n-- +goose ENVSUB ON\n-- +goose StatementBegin\n\
         CREATE FUNCTION who() RETURNS text LANGUAGE plpgsql AS $body$\n\
         BEGIN RETURN '${GOOSE_OWNER}' || $$/$$; END;\n$body$;\n\
         -- +goose StatementEnd\n",
    )
    .unwrap();
    let out = dirthara(&db.url, dir.path(), &["migrate"])
        .env("GOOSE_OWNER", "alice")
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(db.strings("SELECT who()").await, ["alice/"]);
}

/// A `V<n>__` directory that is not declared Flyway's may be refinery's, which replaces
/// nothing: its `${…}` stay as written.
#[tokio::test]
async fn an_undeclared_versioned_directory_keeps_its_placeholders() {
    let root = support::scratch_dir();
    std::fs::write(
        root.path().join("V1__notes.sql"),
        "CREATE TABLE notes (k TEXT, v TEXT);\nINSERT INTO notes VALUES ('kept', '${owner}');\n",
    )
    .unwrap();
    let url = format!("sqlite:{}", root.path().join("db.sqlite").display());
    let out = dirthara(
        &url,
        root.path(),
        &["--no-lock", "--placeholder", "owner=x", "migrate"],
    )
    .output()
    .unwrap();
    ok(&out);
    let db = root.path().join("db.sqlite");
    let rows = sqlite_strings(&db, "SELECT k || '=' || v FROM notes").await;
    assert_eq!(rows, ["kept=${owner}"]);
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
    let migrate_fleet = || {
        let out = dirthara(&db.url, m.path(), &["--schemas", "tenant_*", "migrate"])
            .output()
            .unwrap();
        ok(&out);
    };
    migrate_fleet();
    assert_eq!(
        db.strings(
            "SELECT s || '/' || t FROM tenant_a.marks UNION ALL SELECT s || '/' || t FROM tenant_b.marks"
        )
        .await,
        ["tenant_a/tenant_a", "tenant_b/tenant_b"]
    );
    // A repeatable migration too: each target applies its own text, recorded in its schema.
    std::fs::write(
        m.path().join("R__tenant_view.sql"),
        "-- dirthara:placeholders everywhere\n\
         CREATE OR REPLACE VIEW tenant_view AS SELECT '${dirthara:target}'::text AS t;",
    )
    .unwrap();
    for _ in 0..2 {
        migrate_fleet();
    }
    assert_eq!(
        db.strings(
            "SELECT t FROM tenant_a.tenant_view UNION ALL SELECT t FROM tenant_b.tenant_view \
             UNION ALL SELECT name || ':' || state FROM tenant_a.dirthara_migrations_repeatables"
        )
        .await,
        ["tenant_a", "tenant_b", "tenant_view:applied"]
    );
}

/// MongoDB: a JSON command file that says `"placeholders": true` has the `${name}` in its
/// strings filled in (JSON-escaped: a value holding `"` stays one string), from the file, the
/// environment and the flag; one that does not say so keeps them; an unset one is refused
/// before anything runs.
#[tokio::test]
async fn a_mongodb_command_file_fills_its_strings() {
    use mongodb::bson::{doc, Document};
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let root = support::scratch_dir();
    let dir = root.path().join("migrations");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        root.path().join("dirthara.toml"),
        "[placeholders]\nprefix = \"shop\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("1_users.json"),
        r#"{"placeholders": true, "commands": [
  {"create": "${prefix}_users"},
  {"insert": "${prefix}_users", "documents": [
    {"_id": 1, "owner": "${owner}", "quote": "${quoted}", "file": "${dirthara:filename}"}
  ]}
]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("2_plain.json"),
        r#"[{"insert": "shop_users", "documents": [{"_id": 2, "owner": "${owner}"}]}]"#,
    )
    .unwrap();
    let migrate = |args: &[&str]| {
        let mut cmd = dirthara(&db.url, &dir, args);
        cmd.current_dir(root.path())
            .env("DIRTHARA_PLACEHOLDER_OWNER", "env_owner");
        cmd.output().unwrap()
    };
    ok(&migrate(&[
        "--placeholder",
        r#"quoted=say "hi" \o/"#,
        "migrate",
    ]));
    let users = db.mongo().await.collection::<Document>("shop_users");
    let first = users.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(first.get_str("owner").unwrap(), "env_owner");
    assert_eq!(first.get_str("quote").unwrap(), r#"say "hi" \o/"#);
    assert_eq!(first.get_str("file").unwrap(), "1_users.json");
    let second = users.find_one(doc! { "_id": 2 }).await.unwrap().unwrap();
    assert_eq!(second.get_str("owner").unwrap(), "${owner}");

    std::fs::write(
        dir.join("3_unset.json"),
        "{\"placeholders\": true,\n \"commands\": [{\"create\": \"${missing}\"}]}",
    )
    .unwrap();
    let refused = migrate(&["migrate"]);
    let (stdout, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("3_unset.json: line 2: `${missing}` has no value"),
        "{stderr}"
    );
    let collections = db.mongo().await.list_collection_names().await.unwrap();
    assert!(
        !collections.contains(&"${missing}".to_string()),
        "{collections:?}"
    );
}
