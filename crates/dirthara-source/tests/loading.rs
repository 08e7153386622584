//! The loader on real directories: every problem at once, blank downs, skipped files.

use std::fs;
use std::path::{Path, PathBuf};

use dirthara_source::files::{load_directories, load_directories_reporting, load_sources_with};
use dirthara_source::migration::{Direction, DownSteps};
use dirthara_source::SourceError;

fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

fn problems(dir: &Path) -> Vec<(String, String)> {
    match load_directories(&[dir.to_path_buf()]) {
        Err(SourceError::Invalid(problems)) => problems
            .into_iter()
            .map(|p| {
                let name = p.file.strip_prefix(dir).unwrap().display().to_string();
                (name, p.reason)
            })
            .collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn one_run_reports_every_bad_file_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "1_good.up.sql", "SELECT 1;");
    write(d, "create_users.sql", "SELECT 1;");
    write(d, "2_a.sql", "SELECT 1;");
    write(d, "2_b.sql", "SELECT 1;");
    write(d, "3_orphan.down.sql", "SELECT 1;");
    write(
        d,
        "4_directive.up.sql",
        "-- dirthara:no-transactions\nSELECT 1;",
    );
    write(d, "5_empty.up.sql", "  \n");
    write(d, "6_latin1.up.sql", b"SELECT '\xe9';");
    write(d, "7_bad.up.json", "[{\"create\": \"a\"},");
    write(d, "8_x.sql", "SELECT 1;");
    write(d, "8_x.down.sql", "SELECT 1;");
    let found = problems(d);
    let expect = [
        ("create_users.sql", "not a number"),
        ("2_b.sql", "two migrations have version 2"),
        ("3_orphan.down.sql", "a down step without its up step"),
        ("8_x.down.sql", "is an up-only migration"),
        ("4_directive.up.sql", "unknown directive"),
        ("5_empty.up.sql", "empty up"),
        (
            "6_latin1.up.sql",
            "not valid UTF-8 (invalid byte at offset 8)",
        ),
        ("7_bad.up.json", "not valid JSON"),
    ];
    assert_eq!(found.len(), expect.len(), "{found:#?}");
    for (file, needle) in expect {
        assert!(
            found.iter().any(|(f, r)| f == file && r.contains(needle)),
            "{file}: {needle} not in {found:#?}"
        );
    }
    // The message lists every file, one per line.
    let message = load_directories(&[d.to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("8 problems in the migration files"),
        "{message}"
    );
    assert_eq!(message.lines().count(), 9, "{message}");
}

#[test]
fn a_single_problem_reads_as_file_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "1_x.up.sql", "");
    let message = load_directories(&[dir.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        format!(
            "{}: empty up: it has nothing to run (only comments, whitespace or `;`), so applying \
             it would record the migration and change nothing; write the migration's statements \
             in it, or delete it",
            dir.path().join("1_x.up.sql").display()
        )
    );
}

/// An up step that sends nothing (an unedited `dirthara new` template, `;;;;`) would be
/// recorded as applied while changing nothing, and the SQL written into it afterwards would
/// then fail `CHECKSUM_MISMATCH`: refused in every layout, with where its statements go.
#[test]
fn an_up_step_with_nothing_to_run_is_refused_in_every_layout() {
    const BLANK: [&str; 5] = [
        "",
        "-- create_users: write the change here\n",
        ";;;;",
        "/* nothing */ ;\n  -- still nothing\n;",
        "-- dirthara:no-transaction\n\n",
    ];
    for (i, blank) in BLANK.iter().enumerate() {
        let layouts: [(String, String, &str); 6] = [
            (
                format!("{i}_a.up.sql"),
                blank.to_string(),
                "statements in it",
            ),
            (format!("{i}_a.sql"), blank.to_string(), "statements in it"),
            (
                format!("{i}_a/up.sql"),
                blank.to_string(),
                "statements in it",
            ),
            (
                format!("V{i}__a.sql"),
                blank.to_string(),
                "statements in it",
            ),
            (
                format!("{i}_a.sql"),
                format!("-- migrate:up\n{blank}\n-- migrate:down\nDROP TABLE a;\n"),
                "below `-- migrate:up`",
            ),
            (
                format!("{i}_a.sql"),
                format!("-- +goose Up\n{blank}\n-- +goose Down\nDROP TABLE a;\n"),
                "below `-- +goose Up`",
            ),
        ];
        for (file, text, fix) in layouts {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), &file, &text);
            let found = problems(dir.path());
            assert_eq!(found.len(), 1, "{file} {text:?}: {found:?}");
            assert_eq!(found[0].0, file, "{text:?}");
            assert!(
                found[0].1.starts_with("empty up: it has nothing to run")
                    && found[0].1.contains(fix),
                "{file} {text:?}: {}",
                found[0].1
            );
        }
    }
    for json in ["", "[]", "{\"commands\": []}", " [ ]\n"] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "1_a.up.json", json);
        let found = problems(dir.path());
        assert!(found[0].1.starts_with("empty up"), "{json:?}: {found:?}");
    }
    // Something to run, however it is wrapped, is not blank.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "1_a.up.sql", "-- create users\n;SELECT 1;\n");
    write(dir.path(), "2_b.up.sql", "/*!40101 SET NAMES utf8 */;");
    assert_eq!(
        load_directories(&[dir.path().to_path_buf()]).unwrap().len(),
        2
    );
}

/// A UTF-8 byte-order mark (what Windows editors save) is dropped as the file is read, as
/// Flyway does: the step's text starts at its first statement, its checksum is the one of the
/// file without it, and a file with nothing but the mark and comments is an empty up step.
#[test]
fn a_byte_order_mark_is_dropped_at_load_in_every_layout() {
    const BOM: &str = "\u{feff}";
    let layouts: [(&str, &str); 6] = [
        ("1_a.up.sql", "{}"),
        ("1_a.sql", "{}"),
        ("1_a/up.sql", "{}"),
        ("V1__a.sql", "{}"),
        (
            "1_a.sql",
            "-- migrate:up\n{}\n-- migrate:down\nDROP TABLE a;\n",
        ),
        (
            "1_a.sql",
            "-- +goose Up\n{}\n-- +goose Down\nDROP TABLE a;\n",
        ),
    ];
    for (file, template) in layouts {
        let plain = template.replace("{}", "CREATE TABLE a (id INT);");
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), file, &plain);
        let without = load_directories(&[dir.path().to_path_buf()]).unwrap();
        write(dir.path(), file, format!("{BOM}{plain}"));
        let with = load_directories(&[dir.path().to_path_buf()]).unwrap();
        assert!(!with[0].up().contains(BOM), "{file}: {:?}", with[0].up());
        assert_eq!(with[0].up(), without[0].up(), "{file}");
        assert_eq!(with[0].checksum(), without[0].checksum(), "{file}");
        for blank in ["", "-- nothing yet\n", "\n;\n"] {
            let dir = tempfile::tempdir().unwrap();
            write(
                dir.path(),
                file,
                format!("{BOM}{}", template.replace("{}", blank)),
            );
            let found = problems(dir.path());
            assert!(
                found.len() == 1 && found[0].1.starts_with("empty up"),
                "{file} {blank:?}: {found:?}"
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "1_a.up.json", format!("{BOM}[]"));
    assert!(problems(dir.path())[0].1.starts_with("empty up"));
    write(
        dir.path(),
        "1_a.up.json",
        format!("{BOM}[{{\"create\": \"a\"}}]"),
    );
    let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(loaded[0].up(), "[{\"create\": \"a\"}]");
}

/// A key written twice in one document of a JSON command file is refused at load, naming the
/// file, the key and where: a JSON reader keeps the last, so the first would be lost in silence.
#[test]
fn a_duplicate_key_in_a_json_command_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "1_a.up.json", r#"[{"create": "a", "create": "b"}]"#);
    write(
        d,
        "2_b.up.json",
        r#"[{"update": "a", "updates": [{"q": {}, "u": {"$set": {"x": 1, "x": 2}}}]}]"#,
    );
    write(d, "3_c.up.json", r#"[{"create": "c"}]"#);
    write(
        d,
        "3_c.down.json",
        r#"{"commands": [{"drop": "c"}], "commands": []}"#,
    );
    write(d, "4_d.up.json", r#"[{"create": "d"}, {"create": "e"}]"#);
    let found = problems(d);
    let expect = [
        ("1_a.up.json", "`create`", "line 1 column 25"),
        ("2_b.up.json", "`x`", "line 1 column 65"),
        ("3_c.down.json", "`commands`", "line 1 column 40"),
    ];
    assert_eq!(found.len(), expect.len(), "{found:?}");
    for ((file, reason), (want_file, key, place)) in found.iter().zip(expect) {
        assert_eq!(file, want_file);
        assert!(
            reason.starts_with(&format!(
                "has the key {key} twice in one document at {place}"
            )) && reason.contains("remove or rename the other one"),
            "{file}: {reason}"
        );
    }
}

/// An up and a down file of one version are one migration whatever their descriptions, as
/// golang-migrate pairs them (by version alone), and Flyway its `V`/`U` files; two up files
/// (or two down files) of one version are still two migrations with one version.
#[test]
fn an_up_and_a_down_of_one_version_pair_whatever_their_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "30_add_magic_metadata.up.sql",
        "CREATE TABLE m (id INT);",
    );
    write(d, "30_drop_magic_metadata.down.sql", "DROP TABLE m;");
    write(d, "31_b.up.json", r#"[{"create": "b"}]"#);
    write(d, "31_remove_b.down.json", r#"[{"drop": "b"}]"#);
    let loaded = load_directories(&[d.to_path_buf()]).unwrap();
    assert_eq!(loaded.len(), 2, "{loaded:?}");
    assert_eq!(loaded[0].name, "add_magic_metadata");
    assert_eq!(loaded[0].step(Direction::Down), Some("DROP TABLE m;"));
    assert_eq!(loaded[1].step(Direction::Down), Some(r#"[{"drop": "b"}]"#));

    let flyway = tempfile::tempdir().unwrap();
    write(flyway.path(), "V2__add_c.sql", "CREATE TABLE c (id INT);");
    write(flyway.path(), "U2__drop_c.sql", "DROP TABLE c;");
    let loaded = load_directories(&[flyway.path().to_path_buf()]).unwrap();
    assert_eq!(loaded[0].step(Direction::Down), Some("DROP TABLE c;"));

    let clash = tempfile::tempdir().unwrap();
    let c = clash.path();
    write(c, "30_add_a.up.sql", "CREATE TABLE a (id INT);");
    write(c, "30_add_b.up.sql", "CREATE TABLE b (id INT);");
    write(c, "30_drop_a.down.sql", "DROP TABLE a;");
    write(c, "31_c.up.sql", "CREATE TABLE c (id INT);");
    write(c, "31_drop_c.down.sql", "DROP TABLE c;");
    write(c, "31_undo_c.down.sql", "DROP TABLE c;");
    let found = problems(c);
    assert_eq!(found.len(), 2, "{found:?}");
    for (file, reason) in &found {
        assert!(
            reason.starts_with("two migrations have version 3"),
            "{file}: {reason}"
        );
    }
    assert!(found[0].1.contains("`30_add_a.up.sql`") || found[0].1.contains("30_add_b"));
    assert!(found[1].1.contains("31_drop_c.down.sql") && found[1].1.contains("31_undo_c"));
}

/// A folder named like a Diesel migration but without `up.sql` is never passed over in
/// silence: with only a `down.sql` it is refused (a down without its up), otherwise named in
/// a warning with what it holds.
#[test]
fn diesel_named_folders_without_up_sql_are_refused_or_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "2024-01-01-000001_fine/up.sql",
        "CREATE TABLE a (id INT);",
    );
    write(
        d,
        "2024-01-01-000002_typo/up.sq",
        "CREATE TABLE b (id INT);",
    );
    write(d, "2024-01-01-000002_typo/down.sq", "DROP TABLE b;");
    fs::create_dir(d.join("2024-01-01-000003_empty")).unwrap();
    fs::create_dir(d.join("notes")).unwrap();
    let loaded = load_directories_reporting(&[d.to_path_buf()]).unwrap();
    assert_eq!(loaded.migrations.len(), 1);
    let skipped: Vec<(PathBuf, &str)> = (loaded.skipped.iter())
        .map(|s| (s.path.clone(), s.reason.as_str()))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, d.join("2024-01-01-000002_typo"));
    assert!(
        skipped[0]
            .1
            .contains("without `up.sql` (it holds `down.sq`, `up.sq`)"),
        "{}",
        skipped[0].1
    );
    assert_eq!(skipped[1].0, d.join("2024-01-01-000003_empty"));
    assert!(
        skipped[1].1.contains("(it holds nothing)"),
        "{}",
        skipped[1].1
    );

    write(d, "2024-01-01-000004_only_down/down.sql", "DROP TABLE c;");
    let found = problems(d);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "2024-01-01-000004_only_down");
    assert!(
        found[0].1.contains("`down.sql` but no `up.sql`"),
        "{}",
        found[0].1
    );
}

#[test]
fn blank_down_steps_are_accepted_as_reversing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "1_a.up.sql", "CREATE TABLE a (id INT);");
    write(d, "1_a.down.sql", "");
    write(d, "2_b.up.sql", "CREATE TABLE b (id INT);");
    write(d, "2_b.down.sql", "-- nothing to undo: b is kept\n");
    write(d, "3_c.up.json", "[{\"create\": \"c\"}]");
    write(d, "3_c.down.json", "[]");
    write(d, "4_d.up.json", "[{\"create\": \"d\"}]");
    write(d, "4_d.down.json", "\n");
    let loaded = load_directories(&[d.to_path_buf()]).unwrap();
    let downs: Vec<Option<&str>> = loaded.iter().map(|m| m.step(Direction::Down)).collect();
    assert_eq!(
        downs,
        [
            Some(""),
            Some("-- nothing to undo: b is kept\n"),
            Some("[]"),
            Some("\n")
        ]
    );
    assert!(loaded.iter().all(|m| m.transactional || m.version >= 3));
}

#[test]
fn skipping_down_steps_leaves_their_files_unread_but_still_pairs_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "1_a.up.sql",
        "-- dirthara:no-transaction\nCREATE INDEX i ON t (a);",
    );
    // Were it read, each of these would be refused.
    write(d, "1_a.down.sql", b"DROP INDEX \xe9;");
    write(d, "2_b.up.sql", "SELECT 1;");
    write(d, "2_b.down.sql", "-- dirthara:no-transactions\nSELECT 1;");
    let sources = [(d.to_path_buf(), None)];

    let loaded = load_sources_with(&sources, DownSteps::Skip)
        .unwrap()
        .migrations;
    assert_eq!(loaded.len(), 2);
    for m in &loaded {
        assert!(m.down.is_none() && m.down_unread, "{m:?}");
    }
    assert!(!loaded[0].transactional);
    assert!(loaded[1].transactional);

    // Reading them finds both problems.
    let reasons: Vec<String> = match load_sources_with(&sources, DownSteps::Read) {
        Err(SourceError::Invalid(problems)) => problems.into_iter().map(|p| p.reason).collect(),
        other => panic!("expected problems, got {other:?}"),
    };
    assert_eq!(reasons.len(), 2, "{reasons:?}");

    // What the listing alone shows is refused either way.
    write(d, "3_orphan.down.sql", "SELECT 1;");
    write(d, "4_x.sql", "SELECT 1;");
    write(d, "4_x.down.sql", "SELECT 1;");
    fs::remove_file(d.join("1_a.down.sql")).unwrap();
    fs::remove_file(d.join("2_b.down.sql")).unwrap();
    match load_sources_with(&sources, DownSteps::Skip) {
        Err(SourceError::Invalid(problems)) => {
            let files: Vec<_> = problems
                .iter()
                .map(|p| p.file.file_name().unwrap())
                .collect();
            assert_eq!(files, ["3_orphan.down.sql", "4_x.down.sql"], "{problems:?}");
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn look_alikes_that_are_not_loaded_are_named_as_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "1_a.up.sql", "SELECT 1;");
    write(d, "README.md", "not a migration");
    write(d, "2_b.up.sql.bak", "SELECT 1;");
    write(d, "3_c.up.SQL", "SELECT 1;");
    write(d, ".4_hidden.sql", "SELECT 1;");
    write(d, "notes/up.txt", "not a migration");
    let loaded = load_directories_reporting(&[d.to_path_buf()]).unwrap();
    assert_eq!(loaded.migrations.len(), 1);
    let skipped: Vec<PathBuf> = loaded.skipped.iter().map(|s| s.path.clone()).collect();
    assert_eq!(skipped, [d.join("2_b.up.sql.bak"), d.join("3_c.up.SQL")]);
    assert!(loaded.skipped[0].reason.contains("only `.sql` and `.json`"));
}

#[test]
fn an_unreadable_directory_is_a_directory_error() {
    let err = load_directories(&[PathBuf::from("/nonexistent/dirthara")]).unwrap_err();
    assert!(matches!(err, SourceError::Directory { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot read migration directory"));
}
