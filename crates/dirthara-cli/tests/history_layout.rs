//! The history's own layout across versions, and what a dirty record keeps.
//!
//! Layout 2 added the `failure` column: the error that left a record `running`. A history of
//! layout 1 (written by an older dirthara) is read as it is by the commands that take no
//! lock, and upgraded in place by the first locked command; an upgrade that died half-way
//! (MySQL commits the `ALTER` at once) is finished by the next one. A dirty record quotes its
//! cause to the next run and in `status`.

mod support;

use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

/// Turns a current history back into layout 1, as an older dirthara left it.
async fn back_to_layout_1(db: &TestDb, drop_column: bool) {
    if drop_column {
        db.execute("ALTER TABLE dirthara_migrations DROP COLUMN failure")
            .await;
    }
    db.execute(
        "UPDATE dirthara_migrations_meta SET meta_value = '1' WHERE meta_key = 'layout_version'",
    )
    .await;
}

async fn layout(db: &TestDb) -> String {
    db.strings("SELECT meta_value FROM dirthara_migrations_meta WHERE meta_key = 'layout_version'")
        .await
        .remove(0)
}

async fn has_failure_column(db: &TestDb) -> bool {
    let sql = match db.server {
        Server::Postgres => {
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'dirthara_migrations' \
             AND column_name = 'failure'"
        }
        _ => {
            "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name = 'dirthara_migrations' \
             AND column_name = 'failure'"
        }
    };
    !db.strings(sql).await.is_empty()
}

async fn an_older_layout_is_read_as_it_is_and_upgraded_under_the_lock(
    server: Server,
    half_done: bool,
) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::tables(1);
    let first = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    assert!(first.status.success(), "{:?}", text(&first));
    // `half_done`: an upgrade that added the column and died before the meta table said so.
    back_to_layout_1(&db, !half_done).await;

    let status = dirthara(&db.url, m.path(), &["status", "--output", "json"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{:?}", text(&status));
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(doc["migrations"][0]["state"], "applied", "{doc}");
    assert_eq!(
        layout(&db).await,
        "1",
        "status takes no lock and changes nothing"
    );

    m.add(2, "t2", "CREATE TABLE t2 (id INT)", None);
    let run = dirthara(&db.url, m.path(), &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    assert_eq!(support::applied_versions(&run), vec![2]);
    assert_eq!(layout(&db).await, "2");
    assert!(has_failure_column(&db).await);
    let again = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    assert!(again.status.success(), "{:?}", text(&again));
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_an_older_layout_is_read_as_it_is_and_upgraded_under_the_lock() {
    an_older_layout_is_read_as_it_is_and_upgraded_under_the_lock(Server::Postgres, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_an_older_layout_is_read_as_it_is_and_upgraded_under_the_lock() {
    an_older_layout_is_read_as_it_is_and_upgraded_under_the_lock(Server::Mysql, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_an_upgrade_that_died_after_its_alter_is_finished_by_the_next_run() {
    an_older_layout_is_read_as_it_is_and_upgraded_under_the_lock(Server::Mysql, true).await;
}

#[test]
fn sqlite_an_older_layout_is_upgraded_and_status_leaves_it_alone() {
    use support::project::Project;
    let p = Project::new();
    p.table_migration(1, "t1", "t1");
    p.unlocked("app.db", &["migrate"]).success();
    let db = p.join("app.db");
    let sql = |statement: &str| {
        let out = std::process::Command::new("python3")
            .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print('\\n'.join(str(r[0]) for r in c.execute(sys.argv[2]))); c.commit()"])
            .arg(&db)
            .arg(statement)
            .output()
            .unwrap();
        assert!(out.status.success(), "{:?}", text(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    sql("ALTER TABLE dirthara_migrations DROP COLUMN failure");
    sql("UPDATE dirthara_migrations_meta SET meta_value = '1' WHERE meta_key = 'layout_version'");
    p.unlocked("app.db", &["status"])
        .success()
        .stdout_has("applied");
    assert_eq!(sql("SELECT meta_value FROM dirthara_migrations_meta"), "1");
    p.table_migration(2, "t2", "t2");
    p.unlocked("app.db", &["migrate"]).success();
    assert_eq!(sql("SELECT meta_value FROM dirthara_migrations_meta"), "2");
    assert_eq!(
        sql("SELECT count(*) FROM pragma_table_info('dirthara_migrations') WHERE name = 'failure'"),
        "1"
    );
}

/// MariaDB commits each DDL statement at once: a migration whose second statement fails has
/// committed its first, so it is left dirty, and the record keeps why.
#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_dirty_migration_quotes_its_cause_to_the_next_run_and_in_status() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "half",
        "CREATE TABLE made (id INT);\n\nINSERT INTO missing_table VALUES (1);",
        None,
    );
    let failed = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    let (_, stderr) = text(&failed);
    assert!(stderr.contains("Error [MIGRATION_FAILED]"), "{stderr}");

    let next = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    let (_, stderr) = text(&next);
    assert!(stderr.contains("Error [DIRTY_MIGRATION]"), "{stderr}");
    assert!(
        stderr.contains("missing_table"),
        "the cause is quoted: {stderr}"
    );
    assert!(stderr.contains("1146"), "with its error number: {stderr}");

    let status = dirthara(&db.url, m.path(), &["status", "--output", "json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let failure = &doc["migrations"][0]["failure"];
    assert!(
        failure["message"]
            .as_str()
            .is_some_and(|m| m.contains("missing_table")),
        "{doc}"
    );
    assert_eq!(failure["code"], "42S02", "{doc}");
    let human = dirthara(&db.url, m.path(), &["status"]).output().unwrap();
    let (stdout, _) = text(&human);
    assert!(stdout.contains("1 left dirty by:"), "{stdout}");

    // Resolving it clears the cause with the state.
    db.execute("DROP TABLE made").await;
    let resolved = dirthara(&db.url, m.path(), &["resolve", "1", "--rolled-back"])
        .output()
        .unwrap();
    assert!(resolved.status.success(), "{:?}", text(&resolved));
}

/// A first run that died between creating the meta table and writing its layout row (MySQL
/// commits the `CREATE TABLE` at once): `status` reads no records, and the next locked run
/// finishes the meta table and applies, instead of refusing it as another tool's.
#[tokio::test]
async fn mariadb_a_first_run_that_died_before_the_layout_row_is_finished_by_the_next() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    db.execute(
        "CREATE TABLE dirthara_migrations_meta (meta_key VARCHAR(64) NOT NULL PRIMARY KEY, \
         meta_value VARCHAR(255) NOT NULL)",
    )
    .await;
    let m = Migrations::new();
    m.add(1, "first", "CREATE TABLE first_one (id INT)", None);
    let status = dirthara(&db.url, m.path(), &["status"]).output().unwrap();
    assert!(status.status.success(), "{:?}", text(&status));
    let out = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(layout(&db).await, "2");
    assert!(db.tables().await.contains(&"first_one".to_string()));
}
