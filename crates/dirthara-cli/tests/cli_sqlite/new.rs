//! `new`.

use crate::support::project::Project;
use crate::DB;

/// Splits `<version>_<rest>` and checks the version is a plausible UTC `YYYYMMDDHHMMSS`.
#[track_caller]
fn timestamp_version(file: &str) -> (i64, &str) {
    let (version, rest) = file.split_once('_').expect("`<version>_<name>`");
    assert_eq!(version.len(), 14, "{file}: a 14-digit timestamp version");
    assert!(version.bytes().all(|b| b.is_ascii_digit()), "{file}");
    let n = |r: std::ops::Range<usize>| version[r].parse::<u32>().unwrap();
    assert!(n(0..4) >= 2024, "{file}: year");
    assert!((1..=12).contains(&n(4..6)), "{file}: month");
    assert!((1..=31).contains(&n(6..8)), "{file}: day");
    assert!(
        n(8..10) < 24 && n(10..12) < 60 && n(12..14) < 60,
        "{file}: time"
    );
    (version.parse().unwrap(), rest)
}

#[test]
fn new_creates_timestamped_up_and_down_files_in_the_dir_creating_it() {
    let p = Project::new();
    let run = p.run(&["--dir", "db/migrations", "new", "create_users"]);
    run.success();
    let files = p.list("db/migrations");
    assert_eq!(files.len(), 2, "{files:?}");
    let (down_version, down) = timestamp_version(&files[0]);
    let (up_version, up) = timestamp_version(&files[1]);
    assert_eq!(down_version, up_version);
    assert_eq!(down, "create_users.down.sql");
    assert_eq!(up, "create_users.up.sql");
    for file in &files {
        assert!(
            run.stdout.contains(file.as_str()),
            "stdout names {file}: {}",
            run.stdout
        );
    }
    assert!(p.list("migrations").is_empty(), "only --dir is written to");
}

/// The template is only comments: refused (naming the file) until the SQL is written, so an
/// unedited template can never be recorded as applied. Then `migrate` takes it.
#[test]
fn new_defaults_to_the_migrations_dir_and_its_template_is_refused_until_filled_in() {
    let p = Project::new();
    let run = p.run(&["new", "first"]);
    let files = p.list("migrations");
    assert_eq!(files.len(), 2, "{files:?}");
    let up = files.iter().find(|f| f.ends_with(".up.sql")).unwrap();
    run.success().stderr_has(&format!(
        "note: write the migration's statements in `migrations/{up}`: until it has something \
         to run, it is refused (INVALID_MIGRATION, empty up)"
    ));
    for command in ["status", "migrate"] {
        p.unlocked(DB, &[command])
            .error("INVALID_MIGRATION")
            .stderr_has(&format!("migrations/{up}: empty up"));
    }
    assert!(p.tables(DB).is_empty(), "nothing was recorded");
    p.migration(up, "CREATE TABLE first (id INTEGER);\n");
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["status"]).success().stdout_has("first");
}

#[test]
fn new_mongo_creates_json_command_files_that_are_refused_until_filled_in() {
    let p = Project::new();
    p.run(&["new", "--mongo", "add_users"]).success();
    let mut files = p.list("migrations");
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(timestamp_version(&files[0]).1, "add_users.down.json");
    assert_eq!(timestamp_version(&files[1]).1, "add_users.up.json");
    // An empty command list is not a migration yet: it is refused, naming the file.
    p.run(&["preview", "migrate"])
        .error("INVALID_MIGRATION")
        .stderr_has(&format!("{}: empty up", files[1]));
}

#[test]
fn new_irreversible_creates_only_an_up_file() {
    let p = Project::new();
    p.run(&["new", "--irreversible", "seed_data"]).success();
    let files = p.list("migrations");
    assert_eq!(files.len(), 1, "{files:?}");
    let (_, rest) = timestamp_version(&files[0]);
    assert_eq!(rest, "seed_data.sql");
}

#[test]
fn new_twice_in_a_row_gives_distinct_increasing_versions() {
    let p = Project::new();
    p.run(&["new", "one"]).success();
    p.run(&["new", "two"]).success();
    let files = p.list("migrations");
    assert_eq!(files.len(), 4, "{files:?}");
    let one = files.iter().find(|f| f.ends_with("_one.up.sql")).unwrap();
    let two = files.iter().find(|f| f.ends_with("_two.up.sql")).unwrap();
    assert!(
        timestamp_version(one).0 < timestamp_version(two).0,
        "{files:?}"
    );
    // Same name twice: still two distinct migrations.
    p.run(&["new", "one"]).success();
    assert_eq!(p.list("migrations").len(), 6);
    for file in p.list("migrations") {
        if file.ends_with(".up.sql") {
            p.migration(&file, "SELECT 1;\n");
        }
    }
    p.unlocked(DB, &["status"]).success();
}

#[test]
fn new_refuses_a_bad_name_and_creates_nothing() {
    let p = Project::new();
    for name in ["bad name", "bad/name", "", "semi;colon", "ünicode"] {
        let run = p.run(&["--dir", "fresh_dir", "new", name]);
        run.code(1);
        assert!(
            run.stderr.starts_with("Error ["),
            "{name:?}: an `Error [CODE]` on stderr: {run:?}"
        );
        assert!(
            !p.exists("fresh_dir") || p.list("fresh_dir").is_empty(),
            "{name:?}"
        );
    }
}
