use super::*;

#[test]
fn literals_are_escaped_per_dialect() {
    assert_eq!(SqlDialect::Postgres.literal("it's"), "'it''s'");
    assert_eq!(SqlDialect::MySql.literal("a\\'b"), "'a\\\\''b'");
    assert_eq!(SqlDialect::MySql.ident("we`ird"), "`we``ird`");
    assert_eq!(SqlDialect::Sqlite.ident("t"), "\"t\"");
}

#[test]
fn another_tools_table_is_read_quoted_and_as_text() {
    assert_eq!(
        SqlDialect::Postgres.read_table_sql(
            "goose_db_version",
            &["version_id", "is_applied"],
            "id"
        ),
        "SELECT (\"version_id\")::text, (\"is_applied\")::text FROM \"goose_db_version\" ORDER BY \"id\""
    );
    assert_eq!(
        SqlDialect::MySql.read_table_sql("_sqlx_migrations", &["version", "success"], "version"),
        "SELECT CAST(`version` AS CHAR), CAST(`success` AS CHAR) FROM `_sqlx_migrations` ORDER BY `version`"
    );
    // Names are quoted with their quotes doubled, whatever reaches here.
    assert_eq!(
        SqlDialect::Sqlite.read_table_sql("a\"b", &["v"], "v"),
        "SELECT CAST(\"v\" AS TEXT) FROM \"a\"\"b\" ORDER BY \"v\""
    );
}

#[test]
fn fresh_drops_views_before_tables() {
    let objects = vec![
        DbObject {
            kind: "table".into(),
            name: "a".into(),
        },
        DbObject {
            kind: "view".into(),
            name: "v".into(),
        },
    ];
    let sql = SqlDialect::Postgres.drop_sql(None, &objects);
    assert_eq!(
        sql,
        "DROP VIEW IF EXISTS \"v\" CASCADE;\nDROP TABLE IF EXISTS \"a\" CASCADE"
    );
}

/// A step asked to check the session lock inside its own transaction, on a database
/// whose driver cannot (SQLite, which has no session lock), is refused before anything
/// of it runs: never run as if the check had passed.
#[tokio::test]
async fn a_step_asking_for_an_in_step_lock_check_the_driver_cannot_make_is_refused() {
    use crate::backend::{Step, StepBody};
    use crate::history::{HistoryChange, NewRecord, RecordState};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("guard.db").display());
    let request = crate::backend::ConnectRequest {
        name: "default".into(),
        kind: crate::backend::BackendKind::Sqlite,
        url: url.clone(),
        operation: "migrate".into(),
        connect_timeout: std::time::Duration::from_secs(5),
        read_only: false,
        init_sql: None,
        history_table: "dirthara_migrations".into(),
        schema: None,
        shared_schemas: Vec::new(),
    };
    let Ok(mut backend) = crate::backend::sqlite::connect(&request).await else {
        panic!("cannot open {url}");
    };
    backend.prepare_history().await.unwrap();
    let record = HistoryChange::Insert(NewRecord {
        version: 1,
        name: "t".into(),
        checksum: "0".into(),
        batch: 1,
        state: RecordState::Applied,
        duration_ms: None,
        applied_by: "test".into(),
    });
    let step = Step {
        body: StepBody::Text("CREATE TABLE t (id INT)", &Default::default()),
        transactional: true,
        record: Some(&record),
        checks_lock: true,
        lock_timeout: None,
        resume_at: 0,
    };
    let failure = backend.run(step).await.unwrap_err();
    assert!(failure.nothing_changed, "{failure:?}");
    assert!(
        failure
            .error
            .message
            .contains("cannot check the session lock"),
        "{failure:?}"
    );
    assert_eq!(backend.read_history().await.unwrap(), Some(vec![]));
    let tables = backend.read_table("t", &["id"], "id").await.unwrap();
    assert_eq!(tables, None, "the step ran");
    backend.close().await;
}
