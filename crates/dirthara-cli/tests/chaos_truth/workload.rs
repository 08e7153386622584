//! What the chaos runners migrate: `n` migrations whose effects and executions can be read
//! back from the database, and the tables they write to, made before the round.
//!
//! Migration `v` creates its marker (table or collection `m<v>`) and inserts a row naming
//! it into `chaos_effects`, which has no unique key, so a second application would show.
//! Every 3rd is slow, every 7th runs outside a transaction, every 11th on PostgreSQL
//! brings its own BEGIN/COMMIT.
//!
//! Each migration also counts its own executions in something its rollback does not undo,
//! so an execution that was rolled back is still seen (PostgreSQL's transactional DDL rolls
//! a duplicate back and would otherwise hide it):
//! - PostgreSQL: `nextval` of the sequence `chaos_exec_<v>`. A sequence is not rolled back
//!   with its transaction, and the server restarts only by clean shutdown, which keeps its
//!   exact value (a crash may advance it by up to 32: PostgreSQL logs sequences ahead).
//! - MariaDB: a row in `chaos_exec`, a MyISAM table: MyISAM has no transactions, so the
//!   row stays whatever happens to the step's transaction.
//! - MongoDB: an `$inc` of `chaos_exec`'s document `v`. The chaos steps are not declared
//!   `"transaction": true`, so each command commits by itself as it runs.
//! - SQLite: nothing in the file outlives a rolled-back transaction, and a step cannot write
//!   outside it (ATTACH is refused inside a transaction). There the count is the runners'
//!   own `migration_started` announcement, which the engine prints, flushed, before it sends
//!   the step; SQLite admits one writer at a time, so a duplicate execution runs after the
//!   first committed, and fails or shows as a second `chaos_effects` row.

use sqlx::{Connection, Executor};

use super::{Kind, Place};
use crate::support::Migrations;

/// The text of migration `v` and its extension.
pub(crate) fn migration(kind: Kind, v: u64) -> (&'static str, String) {
    let slow = v % 3 == 0;
    if kind == Kind::Mongo {
        let count = format!(
            r#"{{"update": "chaos_exec", "updates": [{{"q": {{"_id": {v}}}, "u": {{"$inc": {{"n": 1}}}}, "upsert": true}}]}},"#
        );
        // The test server has no `sleep` command: a thousand inserts instead.
        let ballast = if slow {
            let docs = vec![r#"{"x": "chaos"}"#; 1000].join(", ");
            format!(r#"{{"insert": "ballast", "documents": [{docs}]}},"#)
        } else {
            String::new()
        };
        let text = format!(
            r#"[{count}{ballast}{{"create": "m{v}"}}, {{"insert": "chaos_effects", "documents": [{{"version": {v}}}]}}]"#
        );
        return ("json", text);
    }
    let count = match kind {
        Kind::Postgres => format!("SELECT nextval('chaos_exec_{v}');\n"),
        Kind::Mysql => format!("INSERT INTO chaos_exec (version) VALUES ({v});\n"),
        _ => String::new(),
    };
    let sleep = match (slow, kind) {
        (false, _) => "",
        (true, Kind::Postgres) => "SELECT pg_sleep(0.3);\n",
        (true, Kind::Mysql) => "SELECT SLEEP(0.3);\n",
        // No sleep function: a couple of million rows of busy work.
        (true, _) => "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT count(*) FROM c;\n",
    };
    let effect =
        format!("CREATE TABLE m{v} (id INT);\nINSERT INTO chaos_effects (version) VALUES ({v});\n");
    let text = if kind == Kind::Postgres && v % 11 == 0 {
        format!("BEGIN;\n{count}{effect}SELECT pg_sleep(0.2);\nCOMMIT;\n")
    } else if v % 7 == 0 {
        format!("-- dirthara:no-transaction\n{count}{sleep}{effect}")
    } else {
        format!("{count}{sleep}{effect}")
    };
    ("sql", text)
}

/// The migrations directory of a round.
pub(crate) fn migrations(kind: Kind, n: u64) -> Migrations {
    let m = Migrations::new();
    for v in 1..=n {
        let (ext, text) = migration(kind, v);
        m.add_as(ext, v as i64, &format!("m{v}"), &text, None);
    }
    m
}

/// Creates what the migrations write to besides their markers.
pub(crate) async fn prepare(kind: Kind, place: &Place, n: u64) {
    match (place, kind) {
        (Place::Sqlite(_), _) => {
            let url = format!("{}?mode=rwc", place.url());
            let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
            c.execute("CREATE TABLE chaos_effects (version INT NOT NULL)")
                .await
                .unwrap();
            c.close().await.unwrap();
        }
        (Place::Server(db), Kind::Postgres) => {
            let mut sql = String::from("CREATE TABLE chaos_effects (version INT NOT NULL);\n");
            for v in 1..=n {
                sql.push_str(&format!("CREATE SEQUENCE chaos_exec_{v};\n"));
            }
            db.execute(&sql).await;
        }
        (Place::Server(db), Kind::Mysql) => {
            db.execute("CREATE TABLE chaos_effects (version INT NOT NULL) ENGINE=InnoDB")
                .await;
            db.execute("CREATE TABLE chaos_exec (version INT NOT NULL) ENGINE=MyISAM")
                .await;
        }
        // MongoDB creates the collections on first write.
        _ => {}
    }
}
