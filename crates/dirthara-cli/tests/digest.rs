//! A `migrate` with nothing to do compares the history's digest with the files' instead of
//! reading every record. On every backend: an up-to-date history takes that path (the
//! `planned` event says `by_digest`), and everything the records would have shown still
//! shows — a changed checksum, a missing file, a dirty record, a pending file older than the
//! newest applied one, a pending file at the end.

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use sqlx::Connection;
use support::servers::{Server, TestDb};
use support::{dirthara, scratch_dir, text, Migrations};

/// Where the history lives, and how to reach into it behind dirthara's back.
enum Target {
    Sqlite(tempfile::TempDir),
    Server(TestDb),
}

impl Target {
    async fn new(server: Option<Server>) -> Option<Target> {
        match server {
            None => Some(Target::Sqlite(scratch_dir())),
            Some(server) => TestDb::create(server).await.map(Target::Server),
        }
    }

    fn url(&self) -> String {
        match self {
            Target::Sqlite(dir) => format!("sqlite:{}", dir.path().join("app.db").display()),
            Target::Server(db) => db.url.clone(),
        }
    }

    fn is_mongo(&self) -> bool {
        matches!(self, Target::Server(db) if db.server == Server::Mongo)
    }

    fn run(&self, dir: &Path, args: &[&str]) -> Output {
        let mut all = vec!["--output", "ndjson"];
        if matches!(self, Target::Sqlite(_)) {
            all.extend(["--locking", "lease"]);
        }
        all.extend(args);
        dirthara(&self.url(), dir, &all).output().unwrap()
    }

    /// Marks record `version` `running`, as a run that died inside it left it.
    async fn make_dirty(&self, version: i64) {
        match self {
            Target::Sqlite(dir) => {
                use sqlx::Connection;
                let url = format!("sqlite:{}", dir.path().join("app.db").display());
                let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
                sqlx::query("UPDATE dirthara_migrations SET state = 'running' WHERE version = ?")
                    .bind(version)
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
            Target::Server(db) if db.server == Server::Mongo => {
                use mongodb::bson::{doc, Document};
                let history = db
                    .mongo()
                    .await
                    .collection::<Document>("dirthara_migrations");
                let update = doc! { "$set": { "state": "running" } };
                history
                    .update_one(doc! { "_id": version }, update)
                    .await
                    .unwrap();
            }
            Target::Server(db) => {
                db.execute(&format!(
                    "UPDATE dirthara_migrations SET state = 'running' WHERE version = {version}"
                ))
                .await
            }
        }
    }
}

/// The `planned` event of an ndjson run: (steps, by digest).
fn planned(output: &Output) -> Option<(u64, bool)> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().find_map(|line| {
        let event: Value = serde_json::from_str(line).ok()?;
        (event["event"] == "planned").then(|| {
            let by_digest = event["by_digest"].as_bool().unwrap_or(false);
            (event["steps"].as_u64().unwrap_or(0), by_digest)
        })
    })
}

fn error_code(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    (stdout.lines())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["event"] == "error")
        .map(|event| {
            event["error"]["code"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_default()
}

fn migration(m: &Migrations, mongo: bool, version: i64, body: &str) {
    let name = format!("m{version}");
    if mongo {
        let up = format!(r#"[{{"insert": "effects", "documents": [{{"_id": "{body}"}}]}}]"#);
        m.add_as("json", version, &name, &up, None);
    } else {
        let up = format!("CREATE TABLE {body} (id INT)");
        m.add(version, &name, &up, None);
    }
}

async fn the_digest_path_takes_no_shortcut_past_anything_the_records_show(server: Option<Server>) {
    let Some(target) = Target::new(server).await else {
        return;
    };
    let mongo = target.is_mongo();
    let m = Migrations::new();
    for version in [1, 3, 4] {
        migration(&m, mongo, version, &format!("t{version}"));
    }
    let first = target.run(m.path(), &["migrate"]);
    assert!(first.status.success(), "{:?}", text(&first));
    assert_eq!(planned(&first), Some((3, false)), "{:?}", text(&first));

    // Up to date: the digest decides, and nothing runs.
    let again = target.run(m.path(), &["migrate"]);
    assert!(again.status.success(), "{:?}", text(&again));
    assert_eq!(planned(&again), Some((0, true)), "{:?}", text(&again));

    // A file edited after it was applied.
    let edited = m
        .path()
        .join("4_m4.sql")
        .with_extension(if mongo { "json" } else { "sql" });
    let original = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, format!("{original}\n")).unwrap();
    let changed = target.run(m.path(), &["migrate"]);
    assert_eq!(
        error_code(&changed),
        "CHECKSUM_MISMATCH",
        "{:?}",
        text(&changed)
    );
    std::fs::write(&edited, &original).unwrap();

    // An applied migration whose file is gone.
    std::fs::rename(&edited, m.path().join("aside")).unwrap();
    let missing = target.run(m.path(), &["migrate"]);
    assert_eq!(
        error_code(&missing),
        "MISSING_MIGRATION",
        "{:?}",
        text(&missing)
    );
    std::fs::rename(m.path().join("aside"), &edited).unwrap();

    // A dirty record, whose checksum and count are all as the files say.
    target.make_dirty(3).await;
    let dirty = target.run(m.path(), &["migrate"]);
    assert_eq!(error_code(&dirty), "DIRTY_MIGRATION", "{:?}", text(&dirty));
    let resolved = target.run(m.path(), &["resolve", "3", "--applied"]);
    assert!(resolved.status.success(), "{:?}", text(&resolved));
    let clean = target.run(m.path(), &["migrate"]);
    assert_eq!(planned(&clean), Some((0, true)), "{:?}", text(&clean));

    // A pending file older than the newest applied one (merged from a branch), then one at
    // the end: both applied, the first with its warning.
    migration(&m, mongo, 2, "t2");
    let merged = target.run(m.path(), &["migrate"]);
    assert!(merged.status.success(), "{:?}", text(&merged));
    assert_eq!(planned(&merged), Some((1, false)), "{:?}", text(&merged));
    assert!(
        String::from_utf8_lossy(&merged.stderr).contains("warning [OUT_OF_ORDER]"),
        "{:?}",
        text(&merged)
    );
    migration(&m, mongo, 5, "t5");
    let newer = target.run(m.path(), &["migrate"]);
    assert_eq!(planned(&newer), Some((1, false)), "{:?}", text(&newer));
    let settled = target.run(m.path(), &["migrate"]);
    assert_eq!(planned(&settled), Some((0, true)), "{:?}", text(&settled));
}

#[tokio::test]
async fn sqlite_the_digest_path_takes_no_shortcut_past_anything_the_records_show() {
    the_digest_path_takes_no_shortcut_past_anything_the_records_show(None).await;
}

#[tokio::test]
async fn postgres_the_digest_path_takes_no_shortcut_past_anything_the_records_show() {
    the_digest_path_takes_no_shortcut_past_anything_the_records_show(Some(Server::Postgres)).await;
}

#[tokio::test]
async fn mariadb_the_digest_path_takes_no_shortcut_past_anything_the_records_show() {
    the_digest_path_takes_no_shortcut_past_anything_the_records_show(Some(Server::Mysql)).await;
}

#[tokio::test]
async fn mongodb_the_digest_path_takes_no_shortcut_past_anything_the_records_show() {
    the_digest_path_takes_no_shortcut_past_anything_the_records_show(Some(Server::Mongo)).await;
}

/// MySQL cuts `GROUP_CONCAT` at `group_concat_max_len` (1,024 bytes by default on MySQL 8):
/// the digest raises it for its own statement, so a session with the default still finds a
/// long history up to date by its digest, and gets its own limit back afterwards.
#[tokio::test]
async fn mariadb_a_history_longer_than_group_concat_max_len_is_still_proved_by_its_digest() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    for version in 1..=20 {
        m.add(version, &format!("m{version}"), "SELECT 1", None);
    }
    // 20 pairs of about 70 bytes: far beyond 1,024 bytes, MySQL 8's default limit.
    let url = db.url.clone();
    let init = "SET SESSION group_concat_max_len = 1024";
    let run = |args: &[&str]| {
        let mut all = vec!["--init-sql", init, "--output", "ndjson"];
        all.extend(args);
        dirthara(&url, m.path(), &all).output().unwrap()
    };
    let first = run(&["migrate"]);
    assert!(first.status.success(), "{:?}", text(&first));
    let again = run(&["migrate"]);
    assert!(again.status.success(), "{:?}", text(&again));
    assert_eq!(planned(&again), Some((0, true)), "{:?}", text(&again));
    // A migration after the no-op's digest sees the session's own limit, not the digest's.
    m.add(
        21,
        "limit_seen",
        "CREATE TABLE limit_seen AS SELECT @@SESSION.group_concat_max_len AS seen",
        None,
    );
    let third = run(&["migrate"]);
    assert!(third.status.success(), "{:?}", text(&third));
    let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let seen: u64 = sqlx::query_scalar("SELECT seen FROM limit_seen")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(seen, 1024);
}
