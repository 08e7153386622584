//! Advice that is true where it is given: what a failed step's message says became of it.
//! (The layout-true `IRREVERSIBLE_MIGRATION` hints, followed literally, are in
//! `cli_sqlite/layout_hints.rs`.)

mod support;

use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

/// On MariaDB a transactional step runs in a transaction, but DDL commits at once: when a
/// later statement fails, the rollback cannot take the table back. The message says that,
/// never "it could not run in a transaction" (it did).
#[tokio::test(flavor = "multi_thread")]
async fn a_rolled_back_transactional_step_on_mariadb_is_never_said_to_have_run_outside_one() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "half",
        "CREATE TABLE kept_by_ddl (id INT);\nINSERT INTO no_such_table VALUES (1);\n",
        Some("DROP TABLE kept_by_ddl;\n"),
    );
    let out = dirthara(&db.url, m.path(), &["--output", "json", "migrate"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "It ran in a transaction, but this database commits schema changes (DDL) at once, \
             so the rollback could not undo what ran before the failure, so the history marks \
             it as running"
        ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("could not run in a transaction"),
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let migration = &doc["error"]["migration"];
    assert_eq!(migration["transactional"], true, "{doc}");
    assert_eq!(migration["left_dirty"], true, "{doc}");

    // A `no-transaction` step that fails the same way could not run in one, and says so.
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        2,
        "alone",
        "-- dirthara:no-transaction\nCREATE TABLE kept_alone (id INT);\nINSERT INTO no_such_table VALUES (1);\n",
        None,
    );
    let out = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("It could not run in a transaction, so the history marks it as running"),
        "{stderr}"
    );
}
