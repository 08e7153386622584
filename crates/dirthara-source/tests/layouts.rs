//! Other tools' layouts load to the same migrations as their plain-layout twin, through the
//! same rules; mixed, ambiguous and unsupported directories are refused with the files named.

use std::fs;
use std::path::{Path, PathBuf};

use dirthara_source::files::{load_directories, load_sources, DirectoryLayout, Layout};
use dirthara_source::migration::{Direction, Migration};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// What must be equal between twins: everything but where the files are.
fn essence(m: &Migration) -> impl PartialEq + std::fmt::Debug + '_ {
    (
        m.version,
        m.name.as_str(),
        m.up(),
        m.step(Direction::Down),
        m.transactional,
        m.transactional_in(Direction::Down),
        m.checksum(),
        m.format,
    )
}

#[test]
fn every_layout_loads_to_the_same_migrations_as_its_plain_twin() {
    let plain = load_directories(&[fixture("plain")]).unwrap();
    assert_eq!(plain.len(), 3);
    assert_eq!(
        plain[1].step(Direction::Down),
        Some("-- nothing to undo: the rows may stay\n")
    );
    assert_eq!(plain[2].down, None);
    for (layout, name) in [
        (Layout::Diesel, "diesel"),
        (Layout::Dbmate, "dbmate"),
        (Layout::Goose, "goose"),
        (Layout::Flyway, "flyway"),
    ] {
        // Detected from the files, and named explicitly: the same result, but for whether
        // the layout was declared, which each migration carries for the advice about it.
        let detected = load_directories(&[fixture(name)]).unwrap();
        let mut named = load_sources(&[(fixture(name), Some(layout))]).unwrap();
        for (found, declared) in [(&detected, false), (&named.migrations, true)] {
            for m in found {
                assert_eq!(
                    m.layout,
                    Some(DirectoryLayout { layout, declared }),
                    "{name}"
                );
            }
        }
        for m in &mut named.migrations {
            m.layout = m.layout.map(|l| DirectoryLayout {
                declared: false,
                ..l
            });
        }
        assert_eq!(detected, named.migrations, "{name}");
        assert!(named.skipped.is_empty(), "{name}: {:?}", named.skipped);
        let ours: Vec<_> = detected.iter().map(essence).collect();
        let twins: Vec<_> = plain.iter().map(essence).collect();
        assert_eq!(ours, twins, "{name}");
    }
}

fn write(dir: &Path, name: &str, contents: &str) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

fn error_of(dirs: &[(PathBuf, Option<Layout>)]) -> String {
    load_sources(dirs).unwrap_err().to_string()
}

#[test]
fn native_transaction_switches_turn_the_transaction_off() {
    for (name, contents) in [
        ("1_a.sql", "-- migrate:up transaction:false\nCREATE INDEX i ON t (a);\n-- migrate:down\nDROP INDEX i;\n"),
        ("1_a.sql", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX i ON t (a);\n-- +goose Down\nDROP INDEX i;\n"),
        ("1_a/up.sql", "CREATE INDEX i ON t (a);\n"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), name, contents);
        if name.starts_with("1_a/") {
            write(dir.path(), "1_a/metadata.toml", "run_in_transaction = false\n");
        }
        let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
        assert!(!loaded[0].transactional, "{contents}");
        assert_eq!(loaded[0].up(), "CREATE INDEX i ON t (a);\n");
        // goose's switch is the file's, both steps; dbmate's is the section's.
        let down_transactional = loaded[0].down.as_ref().map(|d| d.transactional);
        let expected = match contents.contains("+goose") {
            true => Some(false),
            false => contents.contains("migrate:down").then_some(true),
        };
        assert_eq!(down_transactional, expected, "{contents}");
    }
}

#[test]
fn goose_envsub_regions_are_kept_per_section_and_the_annotations_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = "-- +goose ENVSUB ON\n-- +goose Up\nCREATE TABLE ${P}a (x int);\n\
                -- +goose envsub off\nCREATE TABLE ${P}b (x int);\n-- +goose Down\n\
                -- +goose ENVSUB ON\nDROP TABLE ${P}a;\n";
    write(dir.path(), "1_a.sql", file);
    let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
    let m = &loaded[0];
    assert_eq!(
        m.up(),
        "CREATE TABLE ${P}a (x int);\nCREATE TABLE ${P}b (x int);\n"
    );
    let up = &m.source_of(Direction::Up).envsub;
    assert_eq!(
        up.iter().map(|r| &m.up()[r.clone()]).collect::<Vec<_>>(),
        ["CREATE TABLE ${P}a (x int);\n"]
    );
    let down = m.down.as_ref().unwrap();
    assert_eq!(down.text, "DROP TABLE ${P}a;\n");
    assert_eq!(down.source.envsub, vec![0..down.text.len()]);
    // The file's lines: the up text's line 2 is the file's line 5 (the OFF line is left out).
    assert_eq!(m.source_of(Direction::Up).file_line(2), 5);
}

#[test]
fn diesel_versions_drop_their_dashes_and_the_initial_setup_is_version_0() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "00000000000000_diesel_initial_setup/up.sql",
        "SELECT 1;\n",
    );
    write(
        dir.path(),
        "00000000000000_diesel_initial_setup/down.sql",
        "SELECT 0;\n",
    );
    write(
        dir.path(),
        "2022-07-27-110000_create_posts/up.sql",
        "SELECT 2;\n",
    );
    write(
        dir.path(),
        "20220801120000_create_tags/up.sql",
        "SELECT 3;\n",
    );
    let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
    let versions: Vec<_> = loaded
        .iter()
        .map(|m| (m.version, m.name.as_str()))
        .collect();
    assert_eq!(
        versions,
        [
            (0, "diesel_initial_setup"),
            (20220727110000, "create_posts"),
            (20220801120000, "create_tags")
        ]
    );
}

#[test]
fn a_directory_mixing_layouts_is_refused_naming_the_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "1_a.up.sql", "SELECT 1;\n");
    write(dir.path(), "2_b.sql", "-- +goose Up\nSELECT 2;\n");
    write(dir.path(), "V3__c.sql", "SELECT 3;\n");
    let err = error_of(&[(dir.path().to_path_buf(), None)]);
    for needle in [
        "mixes migration layouts",
        "`1_a.up.sql` (dirthara/sqlx/golang-migrate)",
        "`2_b.sql` (goose)",
        "`V3__c.sql` (flyway)",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // Named explicitly, the files of other layouts are named one by one.
    let err = error_of(&[(dir.path().to_path_buf(), Some(Layout::Goose))]);
    assert!(err.starts_with("2 problems"), "{err}");
    assert!(
        err.contains("1_a.up.sql: is a dirthara/sqlx/golang-migrate migration"),
        "{err}"
    );
}

#[test]
fn a_diesel_folder_in_a_directory_named_otherwise_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "1_a.up.sql", "SELECT 1;\n");
    write(dir.path(), "2_b/up.sql", "SELECT 2;\n");
    let loaded = load_sources(&[(dir.path().to_path_buf(), Some(Layout::Plain))]).unwrap();
    assert_eq!(loaded.migrations.len(), 1);
    assert_eq!(loaded.skipped[0].path, dir.path().join("2_b"));
    // Detected, the same directory is a mix.
    assert!(error_of(&[(dir.path().to_path_buf(), None)]).contains("mixes"));
}

/// Migration 1 `a`, in each layout: its file, its contents.
const ONE_MIGRATION_IN_EACH_LAYOUT: [(&str, &str, Layout); 5] = [
    ("1_a.up.sql", "SELECT 1;\n", Layout::Plain),
    ("V1__a.sql", "SELECT 1;\n", Layout::Flyway),
    ("1_a.sql", "-- +goose Up\nSELECT 1;\n", Layout::Goose),
    ("1_a.sql", "-- migrate:up\nSELECT 1;\n", Layout::Dbmate),
    ("1_a/up.sql", "SELECT 1;\n", Layout::Diesel),
];

/// `R__<name>.sql` is a repeatable migration in every layout, beside that layout's versioned
/// files (a directory of them alone is dirthara's): after them, in name order, with the
/// directory's layout; a bad name, or one name twice, is refused.
#[test]
fn repeatables_load_in_every_layout_after_the_versioned_migrations() {
    for (file, contents, layout) in ONE_MIGRATION_IN_EACH_LAYOUT {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), file, contents);
        write(dir.path(), "R__views.sql", "CREATE VIEW v AS SELECT 1;\n");
        write(
            dir.path(),
            "R__grants.sql",
            "-- dirthara:no-transaction\nGRANT x;\n",
        );
        let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
        let names: Vec<(&str, bool)> = (loaded.iter())
            .map(|m| (m.name.as_str(), m.repeatable))
            .collect();
        assert_eq!(
            names,
            [("a", false), ("grants", true), ("views", true)],
            "{layout:?}"
        );
        assert!(
            loaded.iter().all(|m| m.layout.unwrap().layout == layout),
            "{layout:?}"
        );
        assert!(!loaded[1].transactional, "the file's directive holds");
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "R__only.json", "[{\"create\": \"c\"}]");
    let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
    assert!(loaded[0].repeatable && loaded[0].name == "only");

    write(dir.path(), "R__bad name.sql", "SELECT 1;");
    assert!(error_of(&[(dir.path().to_path_buf(), None)]).contains("R__<name>.sql"));
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(a.path(), "R__v.sql", "SELECT 1;");
    write(b.path(), "R__v.sql", "SELECT 2;");
    let both = [
        (a.path().to_path_buf(), None),
        (b.path().to_path_buf(), None),
    ];
    assert!(error_of(&both).contains("two repeatable migrations are named `v`"));
}

/// `B<V>__<name>.sql` (`.json`) is a baseline migration in every layout, kept after the
/// versioned migrations (its version may be one of theirs) and before the repeatable ones;
/// it names the versions it stands for, none above its own, and only it may.
#[test]
fn baselines_load_in_every_layout_and_name_the_versions_they_stand_for() {
    for (file, contents, layout) in ONE_MIGRATION_IN_EACH_LAYOUT {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), file, contents);
        write(
            dir.path(),
            "B1__squash.sql",
            "-- dirthara:squashes 1\nCREATE TABLE t (id INT);\n",
        );
        write(dir.path(), "R__views.sql", "CREATE VIEW v AS SELECT 1;\n");
        let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
        let shown: Vec<(&str, i64, Option<Vec<i64>>)> = (loaded.iter())
            .map(|m| (m.name.as_str(), m.version, m.squashes.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                ("a", 1, None),
                ("squash", 1, Some(vec![1])),
                ("views", 0, None)
            ],
            "{layout:?}"
        );
        assert_eq!(loaded[1].layout.unwrap().layout, layout);
    }
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "B3__squash.json",
        r#"{"squashes": [1, 3], "commands": [{"create": "c"}]}"#,
    );
    let loaded = load_directories(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(loaded[0].squashes, Some(vec![1, 3]));

    for (name, contents, needle) in [
        (
            "B2__s.sql",
            "CREATE TABLE t (id INT);",
            "names the versions it stands for",
        ),
        (
            "B2__s.sql",
            "-- dirthara:squashes 1,3\nSELECT 1;",
            "above its own version 2",
        ),
        (
            "B2__s.sql",
            "-- dirthara:squashes 2,1\nSELECT 1;",
            "increasing order",
        ),
        (
            "B2_s.sql",
            "SELECT 1;",
            "a baseline migration is `B<version>__<name>.sql`",
        ),
        (
            "2_s.up.sql",
            "-- dirthara:squashes 1\nSELECT 1;",
            "only a baseline migration",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), name, contents);
        let error = error_of(&[(dir.path().to_path_buf(), None)]);
        assert!(error.contains(needle), "{name}: {error}");
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "B2__a.sql", "-- dirthara:squashes 2\nSELECT 1;");
    write(dir.path(), "B2__b.sql", "-- dirthara:squashes 2\nSELECT 2;");
    assert!(error_of(&[(dir.path().to_path_buf(), None)])
        .contains("two baseline migrations have version 2"));
}

#[test]
fn flyway_dotted_versions_and_bad_sections_are_refused() {
    for (name, contents, needle) in [
        ("V1.1__x.sql", "SELECT 1;", "dotted Flyway version `1.1`"),
        ("V1_2__x.sql", "SELECT 1;", "dotted Flyway version `1_2`"),
        (
            "1_a.sql",
            "-- migrate:down\nDROP TABLE t;\n",
            "unexpected `-- migrate:down`",
        ),
        (
            "1_a.sql",
            "-- migrate:up transaction:maybe\nSELECT 1;",
            "unknown dbmate option",
        ),
        (
            "1_a.sql",
            "-- migrate:up\n\n-- migrate:down\nSELECT 1;",
            "empty up: it has nothing to run",
        ),
        (
            "1_a.sql",
            "-- +goose Down\nSELECT 1;",
            "unsupported or misplaced",
        ),
        (
            "1_a.sql",
            "-- +goose NO TRANSACTION\nSELECT 1;",
            "without `-- +goose Up`",
        ),
        (
            "1_a.sql",
            "-- +goose envsub maybe\n-- +goose Up\nSELECT 1;",
            "`-- +goose envsub maybe`",
        ),
        ("bad-name_x/up.sql", "SELECT 1;", "Diesel migration folder"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), name, contents);
        let err = error_of(&[(dir.path().to_path_buf(), None)]);
        assert!(err.contains(needle), "{name}: {needle}: {err}");
        let first = name.split('/').next().unwrap();
        assert!(err.contains(first), "{name}: {err}");
    }
}

#[test]
fn layout_names_parse_as_in_dirthara_toml() {
    for (name, layout) in [
        ("dirthara", Layout::Plain),
        ("sqlx", Layout::Plain),
        ("golang-migrate", Layout::Plain),
        ("diesel", Layout::Diesel),
        ("dbmate", Layout::Dbmate),
        ("goose", Layout::Goose),
        ("flyway", Layout::Flyway),
    ] {
        assert_eq!(Layout::parse(name), Some(layout));
    }
    assert_eq!(Layout::parse("refinery"), None);
}
