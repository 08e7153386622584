//! The start-up routine of `docs/recipes.md` is this package's `startup_routine` binary, word
//! for word; run twice against a real PostgreSQL database, it prints what the recipe shows
//! (the durations aside, which differ from run to run).

use std::path::PathBuf;
use std::process::Command;

mod common;

use common::Scratch;

const PROGRAM: &str = include_str!("../src/bin/startup_routine.rs");

fn recipes() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/recipes.md"
    ))
    .unwrap()
}

/// The code blocks of `page` that open with `fence`, in order.
fn blocks<'a>(page: &'a str, fence: &str) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find(fence) {
        let body = &rest[start + fence.len()..];
        let end = body.find("```").expect("a closed block");
        found.push(&body[..end]);
        rest = &body[end + 3..];
    }
    found
}

/// `text` with the duration that ends a `migrated ...` line replaced by `[DURATION]`, where
/// it is written as `format_duration` writes one (`12 ms`, `8.01 s`, `1 min 30 s`).
fn without_durations(text: &str) -> String {
    (text.lines())
        .map(
            |line| match (line.starts_with("migrated "), line.rfind(" in ")) {
                (true, Some(at)) if is_duration(&line[at + 4..]) => {
                    format!("{} in [DURATION]", &line[..at])
                }
                _ => line.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_duration(text: &str) -> bool {
    let words: Vec<&str> = text.split(' ').collect();
    !words.is_empty()
        && words.len().is_multiple_of(2)
        && words.chunks(2).all(|pair| {
            pair[0].parse::<f64>().is_ok() && ["ms", "s", "min", "h"].contains(&pair[1])
        })
}

#[test]
fn the_recipe_is_the_program_word_for_word() {
    let page = recipes();
    let programs = blocks(&page, "```rust,no_run\n");
    assert_eq!(programs.len(), 1, "one start-up routine in the recipes");
    assert_eq!(
        programs[0], PROGRAM,
        "docs/recipes.md and src/bin/startup_routine.rs differ"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_program_prints_what_the_recipe_shows() {
    let Some(db) = Scratch::create("dirthara_recipe").await else {
        return;
    };
    let url = db.url.clone();
    // The recipe's three migrations, in a working directory of the test's own.
    let dir: PathBuf = std::env::temp_dir().join(db.name());
    let migrations = dir.join("migrations");
    std::fs::create_dir_all(&migrations).unwrap();
    for (file, sql) in [
        (
            "20240101090000_create_users.up.sql",
            "CREATE TABLE users (id BIGSERIAL PRIMARY KEY, email TEXT NOT NULL);",
        ),
        (
            "20240102090000_backfill_slowly.up.sql",
            "SELECT pg_sleep(0.2);",
        ),
        (
            "20240103090000_add_user_name.up.sql",
            "ALTER TABLE users ADD COLUMN name TEXT;",
        ),
    ] {
        std::fs::write(migrations.join(file), sql).unwrap();
    }
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_startup_routine"))
            .current_dir(&dir)
            .env("DATABASE_URL", &url)
            .output()
            .unwrap();
        // What it says on stderr (as it migrates), then its result on stdout.
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        (out.status.success(), printed)
    };
    let (first_ok, first) = run();
    let (second_ok, second) = run();
    let _ = std::fs::remove_dir_all(&dir);
    db.drop_now().await;
    assert!(first_ok && second_ok, "{first}\n{second}");
    let page = recipes();
    let shown = blocks(&page, "```text\n");
    let expected = [
        shown
            .iter()
            .find(|b| b.contains("applied 3 migration(s)"))
            .unwrap(),
        shown
            .iter()
            .find(|b| b.contains("applied 0 migration(s)"))
            .unwrap(),
    ];
    assert_eq!(without_durations(&first), without_durations(expected[0]));
    assert_eq!(without_durations(&second), without_durations(expected[1]));
}
