//! The `IRREVERSIBLE_MIGRATION` hint speaks the layout of the migration's directory, and
//! following it literally makes the migration reversible. The advice once always said to add
//! `<name>.down.sql` and rename the up file `.up.sql`: in a Diesel folder that made
//! `up.down.sql` and hid the migration, in a Flyway directory a second migration of the same
//! version, in a dbmate directory a mixed layout.
//!
//! Each case applies an irreversible migration, has `rollback` refuse it, then does exactly
//! what the hint says (the files it names, the lines it says to add, the command it says to
//! run) and rolls back.

use crate::support::project::Project;
use crate::{user_tables, DB};

/// The statement that reverses each case's migration.
const REVERSE: &str = "DROP TABLE t;";

/// The backticked pieces of `text`, in order.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The piece quoted right after `prefix`, if `text` says `prefix`.
fn quoted_after<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let at = text.find(prefix)? + prefix.len();
    quoted(&text[at - 1..]).first().copied()
}

/// Does what the hint in `stderr` says, literally, and returns the hint.
fn follow(p: &Project, stderr: &str) -> String {
    let hint = stderr
        .lines()
        .find(|l| l.starts_with("Error [IRREVERSIBLE_MIGRATION]"))
        .unwrap_or_else(|| panic!("no hint: {stderr}"))
        .to_string();
    if let Some(toml) = quoted_after(&hint, "declare the layout in dirthara.toml: `") {
        p.write("dirthara.toml", format!("{toml}\n"));
    }
    if let Some(file) = quoted_after(&hint, " line at the end of `") {
        let marker = quoted_after(&hint, "Add a `").expect("the line to add");
        let mut text = std::fs::read_to_string(p.join(file)).unwrap();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("{marker}\n{REVERSE}\n"));
        p.write(file, text);
    }
    for prefix in ["Add `", "add the undo file `", "Add the undo file `"] {
        if let Some(file) = quoted_after(&hint, prefix) {
            p.write(file, format!("{REVERSE}\n"));
        }
    }
    if let Some(from) = quoted_after(&hint, " and rename `") {
        let to = quoted_after(&hint, &format!("{from}` to `")).expect("the new name");
        let dir = p.migrations_dir();
        std::fs::rename(dir.join(from), dir.join(to)).unwrap();
    }
    if let Some(command) = quoted_after(&hint, "so then run `") {
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        p.unlocked(DB, &args).success();
    }
    hint
}

/// Applies `files`, checks `rollback` refuses with a hint that says `says`, follows the hint
/// and checks `rollback` then reverses the migration.
#[track_caller]
fn hint_followed_makes_it_reversible(p: &Project, files: &[(&str, &str)], says: &str) {
    for (file, text) in files {
        p.migration(file, text);
    }
    p.unlocked(DB, &["migrate"]).success();
    assert_eq!(user_tables(p), ["t"]);
    let refused = p.unlocked(DB, &["rollback"]);
    refused.error("IRREVERSIBLE_MIGRATION");
    let hint = follow(p, &refused.stderr);
    assert!(hint.contains(says), "{hint}");
    for wrong in ["up.down.sql", "up.up.sql"] {
        assert!(!hint.contains(wrong), "{hint}");
    }
    let run = p.unlocked(DB, &["--output", "json", "rollback"]);
    run.success();
    let reverted = run.json()["reverted"].as_array().map_or(0, Vec::len);
    assert_eq!(reverted, 1, "{hint}\n{}", run.stdout);
    assert!(user_tables(p).is_empty(), "{hint}");
    // And it stays a well-formed migration of its layout: it applies again.
    p.unlocked(DB, &["migrate"]).success();
}

const UP: &str = "CREATE TABLE t (id INTEGER);\n";

#[test]
fn a_lone_sql_file_gets_a_down_file_and_becomes_an_up_file() {
    hint_followed_makes_it_reversible(
        &Project::new(),
        &[("0001_t.sql", UP)],
        "Add `migrations/0001_t.down.sql` and rename `0001_t.sql` to `0001_t.up.sql`",
    );
}

#[test]
fn an_up_file_gets_its_down_file() {
    hint_followed_makes_it_reversible(
        &Project::new(),
        &[("1_t.up.sql", UP)],
        "Add `migrations/1_t.down.sql`,",
    );
}

#[test]
fn a_diesel_folder_gets_its_down_sql() {
    hint_followed_makes_it_reversible(
        &Project::new(),
        &[("2024-01-01-000001_t/up.sql", UP)],
        "Add `migrations/2024-01-01-000001_t/down.sql` beside its `up.sql`",
    );
}

#[test]
fn a_dbmate_file_gets_a_down_section() {
    hint_followed_makes_it_reversible(
        &Project::new(),
        &[("1_t.sql", &format!("-- migrate:up\n{UP}"))],
        "Add a `-- migrate:down` line at the end of `migrations/1_t.sql`",
    );
}

#[test]
fn a_dbmate_file_without_a_final_line_break_also_has_its_checksum_accepted() {
    hint_followed_makes_it_reversible(
        &Project::new(),
        &[("1_t.sql", "-- migrate:up\nCREATE TABLE t (id INTEGER);")],
        "so then run `dirthara resolve 1 --accept-checksum`",
    );
}

#[test]
fn a_goose_file_gets_a_down_section() {
    hint_followed_makes_it_reversible(
        &Project::new(),
        &[("00001_t.sql", &format!("-- +goose Up\n{UP}"))],
        "Add a `-- +goose Down` line at the end of `migrations/00001_t.sql`",
    );
}

#[test]
fn a_directory_declared_flyway_gets_an_undo_file() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "directories = [{ path = \"migrations\", format = \"flyway\" }]\n",
    );
    hint_followed_makes_it_reversible(
        &p,
        &[("V1__t.sql", UP)],
        "Add the undo file `migrations/U1__t.sql`",
    );
}

/// Undeclared `V<n>__` files may be refinery's, which has no undo files: the hint says so,
/// and how to declare the directory Flyway's to get one.
#[test]
fn an_undeclared_v_directory_is_told_refinery_has_no_undo_and_how_to_declare_flyway() {
    hint_followed_makes_it_reversible(
        &Project::new(),
        &[("V1__t.sql", UP)],
        "refinery has no undo files (it runs a `U` file as a migration of its own): under \
         refinery it stays irreversible. If the directory is Flyway's, declare the layout in \
         dirthara.toml: `directories = [{ path = \"migrations\", format = \"flyway\" }]` and add \
         the undo file `migrations/U1__t.sql`",
    );
}
