//! `dirthara new` in another tool's layout (detected from the directory, or named with
//! `format` in dirthara.toml): the files it writes are that tool's, and they load back —
//! `migrate` applies them and `rollback` reverses them. Also `baseline --from` on SQLite.

mod support;

use support::project::Project;

const DB: &str = "app.db";

/// Fills every file `new` wrote under `migrations/` with real SQL, keeping each tool's
/// markers: the comment lines `new` wrote are replaced by a statement.
fn fill(p: &Project, table: &str) {
    for path in walk(&p.migrations_dir()) {
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text
            .replace(
                &format!("-- {table}: write the change here"),
                &format!("CREATE TABLE {table} (id INTEGER);"),
            )
            .replace(
                &format!("-- {table}: write what reverses the up step here"),
                &format!("DROP TABLE {table};"),
            );
        std::fs::write(&path, text).unwrap();
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// `new` twice in a directory that holds one file of a layout; returns the new names.
fn new_twice(p: &Project, seed: (&str, &str)) -> Vec<String> {
    p.migration(seed.0, seed.1);
    let before = p.list("migrations");
    p.run(&["new", "t_one"]).success();
    fill(p, "t_one");
    p.run(&["new", "t_two"]).success();
    fill(p, "t_two");
    let mut created = p.list("migrations");
    created.retain(|name| !before.contains(name));
    created
}

#[track_caller]
fn applies_and_rolls_back(p: &Project, count: usize) {
    let run = p.unlocked(DB, &["--output", "json", "migrate"]);
    run.success();
    assert_eq!(
        run.json()["applied"].as_array().unwrap().len(),
        count,
        "{}",
        run.stdout
    );
    let tables = p.tables(DB);
    assert!(
        tables.contains(&"t_one".into()) && tables.contains(&"t_two".into()),
        "{tables:?}"
    );
    let run = p.unlocked(DB, &["--output", "json", "rollback", "--all"]);
    run.success();
    assert_eq!(
        run.json()["reverted"].as_array().unwrap().len(),
        count,
        "{}",
        run.stdout
    );
    assert!(!p.tables(DB).contains(&"t_one".into()));
}

/// `V<n>__` files are Flyway's or refinery's; refinery runs a `U` file as a forward migration
/// (a `U` "undo" written here would run its `DROP TABLE` as an up there). So in a directory
/// not declared Flyway's, `new` writes only the `V` file, and says how to declare it.
#[test]
fn new_in_an_undeclared_v_directory_writes_no_undo_file_and_says_how_to_get_one() {
    let p = Project::new();
    p.migration("V1__seed.sql", "CREATE TABLE seed (id INTEGER);");
    let run = p.run(&["new", "t_one"]);
    run.success().stderr_has(
        "note: no undo file was written: `V<n>__` files are Flyway's or refinery's, and \
         refinery runs a `U` file as a migration of its own. If this directory is Flyway's, \
         declare the layout in dirthara.toml: \
         `directories = [{ path = \"migrations\", format = \"flyway\" }]`",
    );
    assert_eq!(p.list("migrations"), ["V1__seed.sql", "V2__t_one.sql"]);
    fill(&p, "t_one");
    let run = p.unlocked(DB, &["--output", "json", "migrate"]);
    run.success();
    assert_eq!(run.json()["applied"].as_array().unwrap().len(), 2);
    // An irreversible migration has no undo file to speak of.
    let run = p.run(&["new", "--irreversible", "t_two"]);
    run.success().nowhere("no undo file");
}

#[test]
fn new_in_a_directory_declared_flyway_writes_the_next_versioned_and_undo_files() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "directories = [{ path = \"migrations\", format = \"flyway\" }]\n",
    );
    let created = new_twice(&p, ("V1__seed.sql", "CREATE TABLE seed (id INTEGER);"));
    assert_eq!(
        created,
        [
            "U2__t_one.sql",
            "U3__t_two.sql",
            "V2__t_one.sql",
            "V3__t_two.sql"
        ]
    );
    applies_and_rolls_back_after_seed(&p);
}

/// The seed file has no down step: reverse only what `new` wrote.
fn applies_and_rolls_back_after_seed(p: &Project) {
    let run = p.unlocked(DB, &["--output", "json", "migrate"]);
    run.success();
    assert_eq!(
        run.json()["applied"].as_array().unwrap().len(),
        3,
        "{}",
        run.stdout
    );
    let run = p.unlocked(DB, &["--output", "json", "rollback", "--steps", "2"]);
    run.success();
    assert_eq!(
        run.json()["reverted"].as_array().unwrap().len(),
        2,
        "{}",
        run.stdout
    );
    let tables = p.tables(DB);
    assert!(
        !tables.contains(&"t_one".into()) && tables.contains(&"seed".into()),
        "{tables:?}"
    );
}

#[test]
fn new_in_a_zero_padded_flyway_directory_keeps_the_padding() {
    let p = Project::new();
    let created = new_twice(&p, ("V001__seed.sql", "CREATE TABLE seed (id INTEGER);"));
    assert!(
        created.contains(&"V002__t_one.sql".to_string()),
        "{created:?}"
    );
    assert!(
        created.contains(&"V003__t_two.sql".to_string()),
        "{created:?}"
    );
}

#[test]
fn new_in_a_dbmate_directory_writes_one_sectioned_file() {
    let p = Project::new();
    let seed =
        "-- migrate:up\nCREATE TABLE seed (id INTEGER);\n-- migrate:down\nDROP TABLE seed;\n";
    let created = new_twice(&p, ("20200101000000_seed.sql", seed));
    assert_eq!(created.len(), 2, "{created:?}");
    let text = std::fs::read_to_string(p.migrations_dir().join(&created[0])).unwrap();
    assert!(
        text.starts_with("-- migrate:up\n") && text.contains("\n-- migrate:down\n"),
        "{text}"
    );
    let run = p.unlocked(DB, &["--output", "json", "migrate"]);
    run.success();
    assert_eq!(run.json()["applied"].as_array().unwrap().len(), 3);
    p.unlocked(DB, &["rollback", "--steps", "2"]).success();
    assert!(!p.tables(DB).contains(&"t_two".into()));
}

#[test]
fn new_in_a_goose_directory_writes_goose_annotations_and_counts_on() {
    let p = Project::new();
    let seed = "-- +goose Up\nCREATE TABLE seed (id INTEGER);\n-- +goose Down\nDROP TABLE seed;\n";
    let created = new_twice(&p, ("00001_seed.sql", seed));
    assert_eq!(created, ["00002_t_one.sql", "00003_t_two.sql"]);
    let text = std::fs::read_to_string(p.migrations_dir().join(&created[0])).unwrap();
    assert!(
        text.starts_with("-- +goose Up\n") && text.contains("\n-- +goose Down\n"),
        "{text}"
    );
    let run = p.unlocked(DB, &["--output", "json", "migrate"]);
    run.success();
    assert_eq!(run.json()["applied"].as_array().unwrap().len(), 3);
}

#[test]
fn new_in_a_diesel_directory_writes_a_dated_folder() {
    let p = Project::new();
    p.migration(
        "2020-01-01-000000_seed/up.sql",
        "CREATE TABLE seed (id INTEGER);",
    );
    p.migration("2020-01-01-000000_seed/down.sql", "DROP TABLE seed;");
    p.run(&["new", "t_one"]).success();
    fill(&p, "t_one");
    p.run(&["new", "t_two"]).success();
    fill(&p, "t_two");
    let folders = p.list("migrations");
    assert_eq!(folders.len(), 3, "{folders:?}");
    for folder in &folders[1..] {
        let (date, _) = folder.split_once('_').unwrap();
        assert!(
            date.len() == 17 && date.chars().filter(|c| *c == '-').count() == 3,
            "{folder}"
        );
        let files = p.list(format!("migrations/{folder}"));
        assert_eq!(files, ["down.sql", "up.sql"], "{folder}");
    }
    applies_and_rolls_back_after_seed(&p);
}

#[test]
fn new_in_an_empty_directory_with_a_configured_format_uses_it() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "directories = [{ path = \"migrations\", format = \"goose\" }]\n",
    );
    p.run(&["new", "t_one"]).success();
    fill(&p, "t_one");
    p.run(&["new", "t_two"]).success();
    fill(&p, "t_two");
    let created = p.list("migrations");
    assert_eq!(created.len(), 2, "{created:?}");
    let text = std::fs::read_to_string(p.migrations_dir().join(&created[0])).unwrap();
    assert!(text.starts_with("-- +goose Up\n"), "{text}");
    applies_and_rolls_back(&p, 2);
}

#[test]
fn new_irreversible_in_a_flyway_directory_writes_no_undo_file() {
    let p = Project::new();
    p.migration("V1__seed.sql", "CREATE TABLE seed (id INTEGER);");
    p.run(&["new", "--irreversible", "more"]).success();
    assert_eq!(p.list("migrations"), ["V1__seed.sql", "V2__more.sql"]);
}

#[test]
fn new_mongo_in_a_sql_tools_directory_is_refused() {
    let p = Project::new();
    p.migration("V1__seed.sql", "CREATE TABLE seed (id INTEGER);");
    p.run(&["new", "--mongo", "more"])
        .error("CONFIG_ERROR")
        .stderr_has("flyway migrations, which are SQL");
}

#[test]
fn baseline_from_sqlx_on_sqlite_records_what_sqlx_applied_then_migrate_runs_the_rest() {
    let p = Project::new();
    // 1 would fail if it ran (the table exists): it must only be recorded.
    p.reversible(
        1,
        "users",
        "CREATE TABLE users (id INTEGER);",
        "DROP TABLE users;",
    );
    p.reversible(
        2,
        "posts",
        "CREATE TABLE posts (id INTEGER);",
        "DROP TABLE posts;",
    );
    // The database as sqlx left it, set up through a separate directory and history table
    // (these tests have no SQLite client of their own).
    p.write(
        "setup/1_sqlx_was_here.sql",
        "CREATE TABLE users (id INTEGER);\n\
         CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success BOOLEAN NOT NULL, \
         checksum BLOB NOT NULL, execution_time BIGINT NOT NULL);\n\
         INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (1, 'users', TRUE, X'00', 10);\n",
    );
    let setup = [
        "--dir",
        "setup",
        "--history-table",
        "setup_history",
        "migrate",
    ];
    p.unlocked(DB, &setup).success();

    let preview = p.unlocked(
        DB,
        &["--output", "json", "preview", "baseline", "--from", "sqlx"],
    );
    preview.success();
    assert_eq!(preview.json()["recorded"][0]["version"], 1);
    assert_eq!(preview.json()["preview"], true);
    // Like every preview, it says it took no lock, in both output formats.
    let notice = preview.json()["notice"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(notice.starts_with("this preview took no lock"), "{notice}");
    p.unlocked(DB, &["preview", "baseline", "--from", "sqlx"])
        .success()
        .stderr_has("note: this preview took no lock");
    assert!(!p.tables(DB).contains(&"dirthara_migrations".into()));
    let run = p.unlocked(DB, &["baseline", "--from", "sqlx"]);
    run.success()
        .stdout_has("recorded as applied (not run) 1 users");
    let run = p.unlocked(DB, &["--output", "json", "migrate"]);
    run.success();
    assert_eq!(run.json()["applied"][0]["version"], 2);
    p.unlocked(DB, &["baseline", "--from", "sqlx"])
        .error("CONFIG_ERROR")
        .stderr_has("already has 2 record(s)");
}
