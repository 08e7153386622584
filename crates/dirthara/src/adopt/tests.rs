//! Each tool's rows, read as that tool reads them.

use super::*;

fn rows(data: &[&[Option<&str>]]) -> Vec<Vec<Option<String>>> {
    data.iter()
        .map(|r| r.iter().map(|c| c.map(str::to_string)).collect())
        .collect()
}

fn applied(h: &ForeignHistory) -> Vec<i64> {
    h.applied.iter().copied().collect()
}

#[test]
fn every_tool_name_parses_back() {
    for name in Tool::NAMES {
        assert_eq!(Tool::parse(name).unwrap().name(), name);
    }
    assert_eq!(Tool::parse("liquibase"), None);
}

#[test]
fn from_table_must_be_a_plain_name() {
    let mut source = AdoptSource::new(Tool::Sqlx);
    assert!(source.check().is_ok());
    source.table = Some("x; DROP TABLE users".into());
    let message = source.check().unwrap_err().to_string();
    assert!(message.contains("--from-table"), "{message}");
}

#[test]
fn sqlx_success_rows_are_applied_and_a_failed_one_is_refused() {
    let ok = parse(
        Tool::Sqlx,
        "t",
        &rows(&[&[Some("1"), Some("true")], &[Some("2"), Some("1")]]),
    )
    .unwrap();
    assert_eq!(applied(&ok), vec![1, 2]);
    assert!(ok.failed.is_none());
    let failed = parse(
        Tool::Sqlx,
        "t",
        &rows(&[&[Some("1"), Some("t")], &[Some("2"), Some("0")]]),
    )
    .unwrap();
    assert_eq!(failed.failed.unwrap().version, 2);
}

#[test]
fn golang_migrate_keeps_one_row_and_dirty_is_refused() {
    let clean = parse(
        Tool::GolangMigrate,
        "t",
        &rows(&[&[Some("3"), Some("false")]]),
    )
    .unwrap();
    let through = clean.through.unwrap();
    assert_eq!((through.version, through.needs_file), (3, true));
    let dirty = parse(
        Tool::GolangMigrate,
        "t",
        &rows(&[&[Some("3"), Some("true")]]),
    )
    .unwrap();
    assert!(dirty.failed.unwrap().fix.contains("migrate force 3"));
    let empty = parse(Tool::GolangMigrate, "t", &[]).unwrap();
    assert!(empty.through.is_none() && empty.applied.is_empty());
    let two = parse(
        Tool::GolangMigrate,
        "t",
        &rows(&[&[Some("1"), Some("f")], &[Some("2"), Some("f")]]),
    );
    assert!(two.unwrap_err().to_string().contains("2 rows"));
}

#[test]
fn dbmate_refinery_and_diesel_list_their_versions() {
    let v = rows(&[&[Some("20240101000001")], &[Some("20240101000002")]]);
    for tool in [Tool::Dbmate, Tool::Refinery, Tool::Diesel] {
        assert_eq!(
            applied(&parse(tool, "t", &v).unwrap()),
            vec![20240101000001, 20240101000002]
        );
    }
    let dashed = parse(Tool::Diesel, "t", &rows(&[&[Some("2022-07-27-110000")]])).unwrap();
    assert_eq!(applied(&dashed), vec![20220727110000]);
    let bad = parse(Tool::Dbmate, "t", &rows(&[&[Some("abc")]])).unwrap_err();
    assert!(bad.to_string().contains("version `abc`"), "{bad}");
}

#[test]
fn goose_latest_row_per_version_decides_and_version_zero_is_its_marker() {
    let history = parse(
        Tool::Goose,
        "t",
        &rows(&[
            &[Some("0"), Some("true")],
            &[Some("1"), Some("true")],
            &[Some("2"), Some("true")],
            &[Some("3"), Some("true")],
            &[Some("3"), Some("false")], // `goose down` reversed 3
        ]),
    )
    .unwrap();
    assert_eq!(applied(&history), vec![1, 2]);
}

#[test]
fn flyway_reads_its_rows_as_flyway_does() {
    let history = parse(
        Tool::Flyway,
        "t",
        &rows(&[
            &[Some("0"), Some("SCHEMA"), Some("1")],
            &[Some("2"), Some("BASELINE"), Some("1")],
            &[None, Some("SQL"), Some("1")], // repeatable
            &[Some("3"), Some("SQL"), Some("1")],
            &[Some("4"), Some("SQL"), Some("1")],
            &[Some("4"), Some("DELETE"), Some("1")],
            &[Some("5"), Some("SQL"), Some("true")],
            &[Some("5"), Some("UNDO_SQL"), Some("true")],
        ]),
    )
    .unwrap();
    assert_eq!(applied(&history), vec![3]);
    let through = history.through.unwrap();
    assert_eq!((through.version, through.needs_file), (2, false));
    assert!(history.failed.is_none());

    let failed = parse(
        Tool::Flyway,
        "t",
        &rows(&[&[Some("1"), Some("SQL"), Some("0")]]),
    )
    .unwrap();
    assert!(failed.failed.unwrap().fix.contains("flyway repair"));
    let dotted = parse(
        Tool::Flyway,
        "t",
        &rows(&[&[Some("1.1"), Some("SQL"), Some("1")]]),
    );
    assert!(dotted
        .unwrap_err()
        .to_string()
        .contains("dotted version `1.1`"));
}

/// A history connection without SQL (here the engine's in-memory backend) is refused
/// before anything is read or written.
#[tokio::test]
async fn a_connection_without_sql_is_refused_before_anything_happens() {
    use std::sync::{Arc, Mutex};

    use crate::backend::memory::{MemoryConnector, MemoryDb};

    let db = Arc::new(Mutex::new(MemoryDb::default()));
    let mut config = crate::Config::with_url("memory://test");
    config.directories.clear();
    let migrator = crate::Migrator::new(config)
        .with_migrations([crate::Migration::new(1, "a", "create a")])
        .with_connector(Arc::new(MemoryConnector(db.clone())));
    let error = migrator
        .baseline_from(&AdoptSource::new(Tool::Goose))
        .await
        .unwrap_err();
    assert_eq!(error.code(), crate::Code::ConfigError);
    assert!(error.to_string().contains("reads a SQL table"), "{error}");
    let calls = db.lock().unwrap().calls.clone();
    assert!(
        !calls.iter().any(|c| c == "prepare" || c == "record"),
        "{calls:?}"
    );
    assert!(db.lock().unwrap().history.is_none());
}

#[test]
fn flyway_repeatable_rows_keep_the_checksum_of_their_latest_successful_apply() {
    let history = parse(
        Tool::Flyway,
        "t",
        &rows(&[
            &[
                Some("1"),
                Some("SQL"),
                Some("1"),
                Some("V1__init.sql"),
                Some("7"),
            ],
            &[
                None,
                Some("SQL"),
                Some("1"),
                Some("R__views.sql"),
                Some("11"),
            ],
            &[
                None,
                Some("SQL"),
                Some("1"),
                Some("db/R__views.sql"),
                Some("-12"),
            ],
            &[
                None,
                Some("SQL"),
                Some("1"),
                Some("R__grants.sql"),
                Some("13"),
            ],
            &[
                None,
                Some("SQL"),
                Some("0"),
                Some("R__grants.sql"),
                Some("14"),
            ],
            &[None, Some("JDBC"), Some("1"), Some("R__code"), Some("15")],
        ]),
    )
    .unwrap();
    assert_eq!(applied(&history), vec![1]);
    let repeatables: Vec<(&str, i32)> = (history.repeatables.iter())
        .map(|(n, c)| (n.as_str(), *c))
        .collect();
    // The latest run of each script decides; a failed one is applied again, as by Flyway.
    assert_eq!(repeatables, [("views", -12)]);
}
