//! Hostile input, fuzzed: the SQL tokenizer, the directive and JSON command parsers, and the
//! loader with every layout never panic, stay within bounded time, and keep their promises
//! (statements are slices of the input; every refusal names a file and a reason).
//!
//! Cases per target: `DIRTHARA_FUZZ_CASES` (default 1000, the CI-short run); the long run
//! is `fuzz/run.sh`, which sets it high. Each target prints its case count. One file: each
//! target is a generator and its promises, and the long run drives them all through one binary.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dirthara_source::commands::{is_blank_commands, parse_commands};
use dirthara_source::files::{check_name, load_sources, parse_directives, Layout};
use dirthara_source::sql::{
    has_client_delimiter, is_blank, line_column, mysql_client_statements, split_statements,
    transaction_control, SqlDialect,
};
use dirthara_test_kit::fuzz::{cases, fuzz, Bounds, CountingAllocator};
use proptest::prelude::*;

const DIALECTS: [SqlDialect; 3] = [SqlDialect::Postgres, SqlDialect::MySql, SqlDialect::Sqlite];
const LAYOUTS: [Option<Layout>; 6] = [
    None,
    Some(Layout::Plain),
    Some(Layout::Diesel),
    Some(Layout::Dbmate),
    Some(Layout::Goose),
    Some(Layout::Flyway),
];

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const MIB: usize = 1024 * 1024;

/// Now and then, one piece repeated into a big input (up to about 1.5 MB): a size no
/// hand-written case reaches, where a quadratic step or a copy per statement would show.
fn huge(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    (prop::sample::select(pieces), 1_000..50_000usize).prop_map(|(piece, n)| piece.repeat(n))
}

/// Text built from the pieces that change a tokenizer's state, mixed with arbitrary text.
fn sqlish() -> impl Strategy<Value = String> {
    const PIECES: &[&str] = &[
        "'",
        "''",
        "\"",
        "`",
        "$$",
        "$a$",
        "$a",
        "/*",
        "*/",
        "/*!",
        "--",
        "-- ",
        "#",
        "\n",
        "\r\n",
        ";",
        " ",
        "\\",
        "\\'",
        "E'",
        "U&'",
        "BEGIN",
        "begin",
        "END",
        "COMMIT",
        "ROLLBACK",
        "START TRANSACTION",
        "SAVEPOINT x",
        "ATOMIC",
        "NOT ATOMIC",
        "CREATE PROCEDURE p()",
        "CREATE FUNCTION f()",
        "CREATE TRIGGER t",
        "DELIMITER //",
        "DELIMITER ;",
        "DELIMITER",
        "//",
        "CASE",
        "IF",
        "LOOP",
        "x",
        "\0",
        "é",
        "\u{feff}",
        "\u{2028}",
        "𝄞",
        "$1",
        "$_$",
        "-- dirthara:no-transaction\n",
        "-- dirthara:connection other\n",
    ];
    prop::collection::vec(
        prop_oneof![
            300 => prop::sample::select(PIECES).prop_map(str::to_string),
            100 => any::<String>(),
            1 => huge(PIECES),
        ],
        0..48,
    )
    .prop_map(|parts| parts.concat())
}

fn check_statements(sql: &str, statements: &[dirthara_source::sql::Statement<'_>]) {
    // Counted once: per statement, it made this check quadratic on a big input (the long run
    // found it, 3 s on 550 KB of `DELIMITER ;`; the tokenizer itself took 70 ms).
    let lines = sql.lines().count().max(1);
    let mut last = 0;
    for s in statements {
        let end = s.offset + s.text.len();
        assert!(end <= sql.len(), "statement past the input: {s:?}");
        assert_eq!(
            &sql[s.offset..end],
            s.text,
            "a statement is a slice of the input"
        );
        assert!(s.offset >= last, "statements out of order: {statements:?}");
        assert!(s.line >= 1 && s.line <= lines + 1);
        last = end;
    }
}

fn tokenize_everything(sql: &str) {
    for dialect in DIALECTS {
        check_statements(sql, &split_statements(sql, dialect));
        if let Some(tc) = transaction_control(sql, dialect) {
            assert!(!tc.keyword.is_empty() && tc.line >= 1);
        }
        let _ = is_blank(sql, dialect);
    }
    let _ = has_client_delimiter(sql);
    match mysql_client_statements(sql) {
        Ok(statements) => {
            for s in &statements {
                assert!(s.text.len() <= sql.len());
            }
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
    let chars = sql.chars().count();
    for index in [0, chars / 2, chars, chars + 10] {
        let (line, column) = line_column(sql, index);
        assert!(line >= 1 && column >= 1);
    }
    let _ = parse_directives(sql);
}

#[test]
fn the_sql_tokenizer_never_panics_and_returns_slices_of_its_input() {
    // Bounds: well above what any input of this size needs; a quadratic step or a copy of
    // the input per statement on a 1.5 MB input is over them.
    let bounds = Bounds::new(Duration::from_secs(2), 64 * MIB);
    fuzz("sql tokenizer", cases(2000), bounds, sqlish(), |sql| {
        tokenize_everything(&sql)
    });
}

#[test]
fn the_sql_tokenizer_is_linear_on_pathological_input() {
    // Megabytes of openers that never close, and deep nesting: each must finish quickly.
    let inputs = [
        "/*".repeat(300_000),
        "$a$".repeat(200_000),
        "'".repeat(600_000),
        "BEGIN ".repeat(150_000),
        "CREATE PROCEDURE p() BEGIN ".repeat(40_000),
        "DELIMITER //\n".repeat(80_000),
        format!("{}{}", "(".repeat(500_000), ";".repeat(500_000)),
        "\0".repeat(1_000_000),
    ];
    for input in inputs {
        let started = Instant::now();
        tokenize_everything(&input);
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(20),
            "{took:?} on {:?}...",
            &input[..20.min(input.len())]
        );
    }
}

/// JSON-ish text: brackets, Extended JSON keys and arbitrary text.
fn jsonish() -> impl Strategy<Value = String> {
    const PIECES: &[&str] = &[
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "\"",
        "\"create\"",
        "\"c\"",
        "\"$date\"",
        "\"$oid\"",
        "\"$numberLong\"",
        "\"$numberDecimal\"",
        "\"$binary\"",
        "\"$regularExpression\"",
        "\"$timestamp\"",
        "\"$minKey\"",
        "\"$undefined\"",
        "\"commands\"",
        "\"transaction\"",
        "\"connection\"",
        "true",
        "null",
        "1",
        "-0",
        "1e400",
        "18446744073709551616",
        "-9223372036854775809",
        "123456789012345678901234567890",
        "{\"$numberLong\": \"99999999999999999999\"}",
        "{\"$date\": {\"$numberLong\": \"-99999999999999999\"}}",
        "{\"$numberDecimal\": \"1E+9999999\"}",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "\u{feff}",
        " ",
    ];
    prop::collection::vec(
        prop_oneof![
            400 => prop::sample::select(PIECES).prop_map(str::to_string),
            100 => any::<String>(),
            1 => huge(PIECES),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

#[test]
fn the_json_command_parser_never_panics() {
    let bounds = Bounds::new(Duration::from_secs(2), 64 * MIB);
    fuzz("json commands", cases(2000), bounds, jsonish(), |text| {
        let _ = is_blank_commands(&text);
        match parse_commands(&text) {
            Ok(commands) => assert!(commands.commands.iter().all(|c| !c.is_empty())),
            Err(reason) => assert!(!reason.is_empty()),
        }
    });
}

#[test]
fn deeply_nested_json_is_refused_without_overflowing_the_stack() {
    // serde_json stops at 128 levels; 100k must be an error, not a stack overflow.
    for depth in [129, 10_000, 100_000] {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let deep = format!(
                "[{{\"x\": {}1{}}}]",
                open.repeat(depth),
                close.repeat(depth)
            );
            let error = parse_commands(&deep).unwrap_err();
            assert!(error.contains("not valid JSON"), "{error}");
            assert!(!is_blank_commands(&deep));
        }
    }
}

/// A file name: the pieces the layouts look for, with control characters and odd Unicode.
fn file_name() -> impl Strategy<Value = Vec<u8>> {
    const PIECES: &[&str] = &[
        "1",
        "2",
        "01",
        "0",
        "20240101120000",
        "9223372036854775808",
        "-1",
        "_",
        "__",
        ".",
        "up",
        "down",
        "sql",
        "json",
        "V",
        "U",
        "R",
        "a",
        "create",
        "\u{1}",
        "\n",
        "\t",
        " ",
        "é",
        "\u{202e}",
        "\\",
        ":",
        "*",
        ".up.sql",
        ".down.sql",
        ".sql",
        ".json",
        ".up.json",
        "~",
    ];
    // Names every layout accepts, so that the file's text is read and checked, not refused
    // by its name first.
    const VALID: &[&str] = &[
        "{v}_m.sql",
        "{v}_m.up.sql",
        "{v}_m.down.sql",
        "{v}_m.up.json",
        "V{v}__m.sql",
        "U{v}__m.sql",
        "2024010112{v:0>4}_m.sql",
    ];
    prop_oneof![
        8 => prop::collection::vec(prop::sample::select(PIECES), 1..8)
            .prop_map(|parts| parts.concat().into_bytes()),
        4 => (1u32..40, prop::sample::select(VALID)).prop_map(|(version, form)| {
            let padded = format!("{version:0>4}");
            form.replace("{v:0>4}", &padded)
                .replace("{v}", &version.to_string())
                .into_bytes()
        }),
        // Not UTF-8 at all.
        1 => prop::collection::vec(any::<u8>(), 1..12).prop_map(|mut bytes| {
            bytes.push(0xff);
            bytes
        }),
    ]
}

fn file_text() -> impl Strategy<Value = Vec<u8>> {
    const HEADERS: &[&str] = &[
        "-- migrate:up\n",
        "-- migrate:down\n",
        "-- migrate:up transaction:false\n",
        "-- +goose Up\n",
        "-- +goose Down\n",
        "-- +goose StatementBegin\n",
        "-- +goose StatementEnd\n",
        "-- +goose NO TRANSACTION\n",
        "-- dirthara:no-transaction\n",
        "-- dirthara:connection reports\n",
        "-- dirthara:bogus\n",
        "run_in_transaction = false\n",
        "[{\"create\": \"c\"}]",
        "[]",
        "",
    ];
    const BIG: &[&str] = &[
        "INSERT INTO t VALUES ('x;y');\n",
        "{\"insert\": \"c\", \"documents\": [{}]},",
        "-- +goose StatementBegin\n",
        "\0",
        "\n",
    ];
    prop_oneof![
        60 => (prop::collection::vec(prop::sample::select(HEADERS), 0..4), sqlish())
            .prop_map(|(headers, sql)| format!("{}{sql}", headers.concat()).into_bytes()),
        10 => prop::collection::vec(any::<u8>(), 0..64),
        1 => huge(BIG).prop_map(String::into_bytes),
    ]
}

/// A directory entry: a file, or a folder of files (Diesel's shape).
#[derive(Debug, Clone)]
enum Entry {
    File(Vec<u8>, Vec<u8>),
    Folder(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>),
}

fn entry() -> impl Strategy<Value = Entry> {
    let inner = prop_oneof![
        Just(b"up.sql".to_vec()),
        Just(b"down.sql".to_vec()),
        Just(b"metadata.toml".to_vec()),
        file_name(),
    ];
    prop_oneof![
        4 => (file_name(), file_text()).prop_map(|(n, t)| Entry::File(n, t)),
        1 => (file_name(), prop::collection::vec((inner, file_text()), 0..3))
            .prop_map(|(n, files)| Entry::Folder(n, files)),
    ]
}

fn usable(name: &[u8]) -> Option<PathBuf> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return None;
    }
    if name.contains(&0) {
        return None;
    }
    Some(PathBuf::from(OsString::from_vec(name.to_vec())))
}

fn write_entries(dir: &Path, entries: &[Entry]) {
    for entry in entries {
        match entry {
            Entry::File(name, text) => {
                if let Some(name) = usable(name) {
                    let _ = std::fs::write(dir.join(name), text);
                }
            }
            Entry::Folder(name, files) => {
                let Some(name) = usable(name) else { continue };
                let folder = dir.join(name);
                if std::fs::create_dir(&folder).is_err() {
                    continue;
                }
                for (file, text) in files {
                    if let Some(file) = usable(file) {
                        let _ = std::fs::write(folder.join(file), text);
                    }
                }
            }
        }
    }
}

fn load_with_every_layout(dir: &Path) {
    for layout in LAYOUTS {
        match load_sources(&[(dir.to_path_buf(), layout)]) {
            Ok(loaded) => {
                let mut versions: Vec<i64> = loaded.migrations.iter().map(|m| m.version).collect();
                versions.dedup();
                assert_eq!(
                    versions.len(),
                    loaded.migrations.len(),
                    "sorted, unique versions"
                );
                for m in &loaded.migrations {
                    assert!(
                        !m.checksum().is_empty() && check_name(&m.name).is_ok(),
                        "{m:?}"
                    );
                }
            }
            Err(dirthara_source::SourceError::Invalid(problems)) => {
                assert!(!problems.is_empty());
                for p in &problems {
                    assert!(!p.reason.trim().is_empty(), "a refusal says why: {p:?}");
                }
            }
            Err(dirthara_source::SourceError::Directory { message, .. }) => {
                assert!(!message.is_empty())
            }
        }
    }
}

#[test]
fn the_loader_never_panics_on_any_directory_with_any_layout() {
    let strategy = prop::collection::vec(entry(), 0..7);
    let bounds = Bounds::new(Duration::from_secs(5), 64 * MIB);
    fuzz("loader", cases(300), bounds, strategy, |entries| {
        let dir = tempfile::tempdir().unwrap();
        write_entries(dir.path(), &entries);
        load_with_every_layout(dir.path());
    });
}

#[test]
fn the_loader_handles_huge_and_binary_files_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "INSERT INTO t VALUES ('x;y');\n".repeat(400_000); // ~12 MB
    std::fs::write(dir.path().join("1_huge.sql"), &huge).unwrap();
    std::fs::write(dir.path().join("2_nul.sql"), b"SELECT 1;\0\0\0").unwrap();
    std::fs::write(dir.path().join("3_latin1.sql"), b"SELECT '\xe9\xff';").unwrap();
    let deep = format!(
        "[{{\"x\": {}1{}}}]",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(dir.path().join("4_deep.json"), deep).unwrap();
    let started = Instant::now();
    let error = load_sources(&[(dir.path().to_path_buf(), None)]).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(30));
    let text = error.to_string();
    // The NUL file, the invalid UTF-8 file and the over-deep JSON are named; the huge file
    // loads.
    assert!(
        text.contains("2_nul.sql: holds a NUL byte at byte offset 9"),
        "{text}"
    );
    assert!(text.contains("3_latin1.sql"), "{text}");
    assert!(text.contains("4_deep.json"), "{text}");
    assert!(!text.contains("1_huge.sql"), "{text}");
    load_with_every_layout(dir.path());
}

/// Regression (issue 22): `SELECT 1;\0` looped for ever on SQLite, dropped the connection on
/// PostgreSQL and left the migration dirty on MySQL. A NUL byte in any step of any layout is
/// refused while loading, naming the file and the offset, every such file in one run.
#[test]
fn a_nul_byte_in_any_migration_file_of_any_layout_is_refused_naming_file_and_offset() {
    let root = tempfile::tempdir().unwrap();
    let dir = |name: &str| {
        let dir = root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    let write = |dir: &Path, name: &str, text: &[u8]| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let plain = dir("plain");
    write(&plain, "1_up.up.sql", b"SELECT 1;\0");
    write(&plain, "1_up.down.sql", b"SELECT 1;");
    write(&plain, "2_down.up.sql", b"SELECT 1;");
    write(&plain, "2_down.down.sql", b"SELECT 1;\nSELECT\0 2;");
    write(&plain, "3_only.sql", b"\0SELECT 1;");
    write(&plain, "4_mongo.up.json", b"[{\"create\": \"c\"}]\0");
    write(&plain, "5_good.sql", b"SELECT 1;");
    // UTF-16 without a byte-order mark is valid UTF-8 with a NUL in every other byte.
    write(&plain, "6_utf16.sql", b"S\0E\0L\0E\0C\0T\0 \x001\0");
    let dbmate = dir("dbmate");
    write(
        &dbmate,
        "7_d.sql",
        b"-- migrate:up\nSELECT 1;\n-- migrate:down\nSELECT\0;\n",
    );
    let goose = dir("goose");
    write(&goose, "8_g.sql", b"-- +goose Up\nSELECT\0 1;\n");
    let diesel = dir("diesel");
    write(&diesel, "2024-01-01-000009_x/up.sql", b"SELECT 1;\0");
    write(&diesel, "2024-01-01-000009_x/down.sql", b"SELECT 1;");
    let flyway = dir("flyway");
    write(&flyway, "V10__f.sql", b"SELECT 1;\r\n\0");

    let sources: Vec<(PathBuf, Option<Layout>)> = ["plain", "dbmate", "goose", "diesel", "flyway"]
        .iter()
        .map(|name| (root.path().join(name), None))
        .collect();
    let error = load_sources(&sources).unwrap_err();
    let dirthara_source::SourceError::Invalid(problems) = &error else {
        panic!("{error}");
    };
    let text = error.to_string();
    for (file, offset, line) in [
        ("1_up.up.sql", 9, 1),
        ("2_down.down.sql", 16, 2),
        ("3_only.sql", 0, 1),
        ("4_mongo.up.json", 17, 1),
        ("6_utf16.sql", 1, 1),
        ("7_d.sql", 46, 4),
        ("8_g.sql", 19, 2),
        ("up.sql", 9, 1),
        ("V10__f.sql", 11, 2),
    ] {
        let expected = format!("holds a NUL byte at byte offset {offset} (line {line})");
        assert!(
            problems
                .iter()
                .any(|p| p.file.ends_with(file) && p.reason.starts_with(&expected)),
            "{file}: {expected}: {text}"
        );
    }
    assert_eq!(problems.len(), 9, "{text}");
    assert!(!text.contains("5_good"), "{text}");
    assert!(text.contains("save it as UTF-8"), "the fix: {text}");
}
