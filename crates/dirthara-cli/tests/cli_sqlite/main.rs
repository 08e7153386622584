//! Black-box tests of the `dirthara` binary against SQLite files in temporary directories.
//!
//! Each test builds its own project (see `support::project::Project`) and runs the binary;
//! nothing here links the library. SQLite has no lock, so runs that change the database pass
//! `--no-lock` (`Project::unlocked`), and the tests that pin the lock refusal use
//! `Project::sqlite`. One binary, one module per command (or concern): a test binary per
//! command would cost a link each.

#[path = "../support/mod.rs"]
mod support;

mod bad_input;
mod baseline_resolve;
mod config;
mod drift;
mod failing;
mod fresh_refresh;
mod layout_hints;
mod lock;
mod migrate;
mod new;
mod output;
mod preview;
mod rollback;
mod status;
mod usage;

use support::project::{sqlite_tables, Project};

/// The database file every test uses, relative to its project directory.
const DB: &str = "app.db";

/// Migrations 1, 2, 3 creating tables `a`, `b`, `c` (reversible).
fn three(p: &Project) {
    p.table_migration(1, "create_a", "a");
    p.table_migration(2, "create_b", "b");
    p.table_migration(3, "create_c", "c");
}

/// 1 and 2 applied in batch 1, 3 in batch 2.
fn two_batches(p: &Project) {
    p.table_migration(1, "create_a", "a");
    p.table_migration(2, "create_b", "b");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(3, "create_c", "c");
    p.unlocked(DB, &["migrate"]).success();
}

/// `(version, state)` of every migration, from `status --output json`.
fn states(p: &Project) -> Vec<(i64, String)> {
    p.states(DB).into_iter().map(|(v, s, _)| (v, s)).collect()
}

fn st(rows: &[(i64, &str)]) -> Vec<(i64, String)> {
    rows.iter().map(|(v, s)| (*v, s.to_string())).collect()
}

/// The user tables of the database (the history tables left out).
fn user_tables(p: &Project) -> Vec<String> {
    p.tables(DB)
        .into_iter()
        .filter(|t| !t.starts_with("dirthara_") && !t.starts_with("sqlite_"))
        .collect()
}

fn versions(list: &serde_json::Value) -> Vec<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {list}"))
        .iter()
        .map(|s| s["version"].as_i64().expect("version is a number"))
        .collect()
}

/// Lines of human stdout that start with `verb` (`applied` / `reverted`), as `(version, name)`.
fn steps(stdout: &str, verb: &str) -> Vec<(i64, String)> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next()? != verb {
                return None;
            }
            let version = words.next()?.parse().ok()?;
            Some((version, words.next()?.to_string()))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The test helper itself
// ---------------------------------------------------------------------------------------------

#[test]
fn the_sqlite_file_reader_sees_many_tables_and_not_dropped_ones() {
    let p = Project::new();
    // Enough tables that the schema spans several b-tree pages.
    let create: String = (0..300)
        .map(|i| format!("CREATE TABLE t_{i:03} (id INTEGER PRIMARY KEY, note TEXT);\n"))
        .collect();
    let drop: String = (0..300)
        .map(|i| format!("DROP TABLE t_{i:03};\n"))
        .collect();
    p.reversible(1, "many", &create, &drop);
    p.irreversible(
        2,
        "index_only",
        "CREATE INDEX t_000_note ON t_000 (note);\n",
    );
    p.unlocked(DB, &["migrate"]).success();
    let tables = user_tables(&p);
    assert_eq!(tables.len(), 300, "{tables:?}");
    assert_eq!(tables[0], "t_000");
    assert_eq!(tables[299], "t_299");
    assert!(p.tables(DB).contains(&"dirthara_migrations".to_string()));
    p.irreversible(3, "drop_some", "DROP TABLE t_005;\nDROP TABLE t_250;\n");
    p.unlocked(DB, &["migrate"]).success();
    let tables = user_tables(&p);
    assert_eq!(tables.len(), 298);
    assert!(!tables.contains(&"t_005".to_string()));
    assert!(!tables.contains(&"t_250".to_string()));
    assert!(sqlite_tables(&p.join("nope.db")).is_empty());
}
