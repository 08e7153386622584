//! `squash --to V` (issue 30), on PostgreSQL, MariaDB (Oracle MySQL in CI's MySQL lane),
//! SQLite and the MongoDB-compatible server. Each migration set is made so that the dump's
//! order (by kind, then name) would not run: a view on a view named after it, a table whose
//! default calls a function or that references a table named after it, a partition named
//! before its parent. The baseline must run anyway:
//! - a new database built from the baseline and the later files has the schema of one built
//!   from all the files, with the originals beside the baseline or archived;
//! - a database that applied the originals goes on from its own history, their files
//!   archived or not, and `status` shows them squashed;
//! - a file merged after the squash with an older version runs on both kinds of database;
//! - an edited baseline is refused by its checksum, never taken for the originals;
//! - a database at a version inside the baseline whose files were archived is refused;
//! - squash is refused on a database not at V, over its file, and over a migration on
//!   another connection; going below the baseline is refused;
//! - a baseline that failed half-way (MySQL, MongoDB: no transactional DDL) is resolved like
//!   any migration.

mod support;

use std::path::Path;
use std::process::Output;

use support::scenarios::{Database, Place};
use support::servers::Server;
use support::{scratch_dir, text};

crate::scenario_tests! {
    postgres => Database::Server(Server::Postgres) => [
        a_new_database_built_from_the_baseline_has_the_schema_of_all_the_files,
    ],
    mariadb => Database::Server(Server::Mysql) => [
        a_new_database_built_from_the_baseline_has_the_schema_of_all_the_files,
        a_baseline_that_failed_half_way_is_resolved_like_any_migration,
    ],
    sqlite => Database::Sqlite => [
        a_new_database_built_from_the_baseline_has_the_schema_of_all_the_files,
    ],
    mongodb => Database::Server(Server::Mongo) => [
        a_new_database_built_from_the_baseline_has_the_schema_of_all_the_files,
        a_baseline_that_failed_half_way_is_resolved_like_any_migration,
    ],
}

/// The versions of the migrations up to the baseline, of the one after it, and of one merged
/// from a branch after the squash, older than the baseline.
const VERSIONS: [i64; 4] = [10, 20, 30, 40];
const AFTER: i64 = 50;
const LATE: i64 = 35;

fn ok(out: &Output, what: &str) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{what}: {stdout}\n{stderr}");
    stdout
}

fn fails_with(out: &Output, code: &str, what: &str) -> String {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(1), "{what}: {stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("Error [{code}]")),
        "{what}: {stderr}"
    );
    stderr
}

/// The migrations up to the baseline (10–40) and the one after it (50), for `server`
/// (`None`: SQLite).
fn migrations(server: Option<Server>) -> (Vec<&'static str>, &'static str) {
    match server {
        Some(Server::Postgres) => (
            vec![
                "CREATE TYPE mood AS ENUM ('ok', 'sad');\n\
                 CREATE TABLE users (id serial PRIMARY KEY, email text NOT NULL UNIQUE, mood mood);",
                // A table whose default calls a function (tables come before functions in a
                // dump), and a partial index.
                "CREATE FUNCTION next_code() RETURNS text LANGUAGE sql AS $$ SELECT 'c' || nextval('users_id_seq')::text $$;\n\
                 CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, \
                   user_id int REFERENCES users (id), code text DEFAULT next_code());\n\
                 CREATE INDEX orders_user ON orders (user_id) WHERE user_id IS NOT NULL;",
                // A view on a view named after it; a trigger and its function.
                "CREATE VIEW z_base AS SELECT id, user_id FROM orders;\n\
                 CREATE VIEW a_recent AS SELECT id FROM z_base WHERE user_id IS NOT NULL;\n\
                 CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.email := lower(NEW.email); RETURN NEW; END $$;\n\
                 CREATE TRIGGER users_touch BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION touch();",
                // A partition named before its parent, a column added, and a seed row.
                "CREATE TABLE events (at date NOT NULL) PARTITION BY RANGE (at);\n\
                 CREATE TABLE a_events_2024 PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');\n\
                 CREATE INDEX events_at ON events (at);\n\
                 ALTER TABLE users ADD COLUMN name text;\n\
                 INSERT INTO users (email) VALUES ('Seed@example.com');",
            ],
            "CREATE TABLE notes (id int PRIMARY KEY, user_id int REFERENCES users (id));",
        ),
        Some(Server::Mysql) => (
            vec![
                "CREATE TABLE users (id INT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(100) NOT NULL UNIQUE);",
                // A table that references one named after it.
                "CREATE TABLE a_orders (id INT PRIMARY KEY, user_id INT, \
                   CONSTRAINT a_orders_user FOREIGN KEY (user_id) REFERENCES users (id));",
                // A view on a view named after it, reading a function; a procedure and a
                // trigger.
                "CREATE FUNCTION twice(x INT) RETURNS INT DETERMINISTIC RETURN x * 2;\n\
                 CREATE VIEW z_base AS SELECT id, twice(id) AS d FROM users;\n\
                 CREATE VIEW a_top AS SELECT id FROM z_base WHERE d > 2;\n\
                 DELIMITER $$\n\
                 CREATE PROCEDURE tidy() BEGIN DELETE FROM a_orders WHERE user_id IS NULL; SELECT 1; END$$\n\
                 DELIMITER ;\n\
                 CREATE TRIGGER users_bi BEFORE INSERT ON users FOR EACH ROW SET NEW.email = LOWER(NEW.email);",
                "ALTER TABLE users ADD COLUMN name VARCHAR(50);\n\
                 INSERT INTO users (email) VALUES ('Seed@example.com');",
            ],
            "CREATE TABLE notes (id INT PRIMARY KEY, user_id INT, FOREIGN KEY (user_id) REFERENCES users (id));",
        ),
        Some(Server::Mongo) => (
            vec![
                r#"[{"create": "users", "validator": {"$jsonSchema": {"required": ["email"]}}},
                    {"createIndexes": "users", "indexes": [{"key": {"email": 1}, "name": "email_1", "unique": true}]}]"#,
                // A view on a collection named after it.
                r#"[{"create": "z_orders"},
                    {"create": "a_recent", "viewOn": "z_orders", "pipeline": [{"$match": {"recent": true}}]}]"#,
                r#"[{"createIndexes": "z_orders", "indexes": [{"key": {"user": 1, "at": -1}, "name": "user_at"}]}]"#,
                r#"[{"create": "audit", "capped": true, "size": 65536},
                    {"insert": "users", "documents": [{"email": "seed@example.com"}]}]"#,
            ],
            r#"[{"create": "notes"}]"#,
        ),
        _ => (
            vec![
                "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);",
                "CREATE TABLE a_orders (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users (id));\n\
                 CREATE INDEX a_orders_user ON a_orders (user_id);",
                "CREATE VIEW z_base AS SELECT id FROM users;\n\
                 CREATE VIEW a_top AS SELECT id FROM z_base WHERE id > 1;\n\
                 CREATE TRIGGER users_ai AFTER INSERT ON users BEGIN INSERT INTO a_orders (user_id) VALUES (NEW.id); END;",
                "ALTER TABLE users ADD COLUMN name TEXT;\n\
                 INSERT INTO users (email) VALUES ('seed@example.com');",
            ],
            "CREATE TABLE notes (id INTEGER PRIMARY KEY);",
        ),
    }
}

/// The migration merged after the squash, older than the baseline.
fn late(server: Option<Server>) -> &'static str {
    match server {
        Some(Server::Mongo) => r#"[{"create": "late_tags"}]"#,
        _ => "CREATE TABLE late_tags (id INT PRIMARY KEY);",
    }
}

fn extension(server: Option<Server>) -> &'static str {
    match server {
        Some(Server::Mongo) => "json",
        _ => "sql",
    }
}

/// The dump's objects: everything before the applied versions.
fn schema_of(place: &Place, dir: &Path) -> String {
    let dump = ok(&place.run_cli(dir, &["dump"]), "dump");
    let (objects, _) = dump.split_once("-- applied versions").expect("a dump");
    assert!(objects.lines().count() > 5, "{dump}");
    objects.to_string()
}

async fn a_new_database_built_from_the_baseline_has_the_schema_of_all_the_files(
    database: Database,
) {
    let Some(old) = Place::new(database).await else {
        return;
    };
    let server = old.db().map(|db| db.server);
    let ext = extension(server);
    let (originals, after) = migrations(server);
    let dir = scratch_dir();
    for (v, up) in VERSIONS.iter().zip(&originals) {
        std::fs::write(dir.path().join(format!("{v}_m{v}.up.{ext}")), up).unwrap();
    }

    // The database squashed from is built in two runs.
    ok(&old.run_cli(dir.path(), &["to", "20"]), "to 20");
    ok(&old.run_cli(dir.path(), &["migrate"]), "migrate");
    // Not at version 30: 40 is applied after it.
    let stderr = fails_with(
        &old.run_cli(dir.path(), &["squash", "--to", "30"]),
        "CONFIG_ERROR",
        "squash at the wrong version",
    );
    assert!(
        stderr.contains("not at version 30 (40 m40 is applied)"),
        "{stderr}"
    );
    assert!(!dir.path().join(format!("B30__squash.{ext}")).exists());

    let wrote = ok(
        &old.run_cli(dir.path(), &["squash", "--to", "40"]),
        "squash",
    );
    assert!(wrote.contains("10–40, 4 migrations"), "{wrote}");
    assert!(wrote.contains("It holds no rows"), "{wrote}");
    let baseline = dir.path().join(format!("B40__squash.{ext}"));
    let text = std::fs::read_to_string(&baseline).unwrap();
    match server {
        Some(Server::Mongo) => assert!(text.contains(r#""squashes": ["#), "{text}"),
        _ => assert!(
            text.starts_with("-- dirthara:squashes 10,20,30,40\n"),
            "{text}"
        ),
    }
    // Written again over itself: refused, the file kept.
    fails_with(
        &old.run_cli(dir.path(), &["squash", "--to", "40"]),
        "CONFIG_ERROR",
        "squash twice",
    );
    assert_eq!(std::fs::read_to_string(&baseline).unwrap(), text);

    // Then a migration after the baseline, and one merged from a branch, older than it.
    std::fs::write(dir.path().join(format!("{AFTER}_m{AFTER}.up.{ext}")), after).unwrap();
    let down = match server {
        Some(Server::Mongo) => r#"[{"drop": "notes"}]"#,
        _ => "DROP TABLE notes;",
    };
    std::fs::write(
        dir.path().join(format!("{AFTER}_m{AFTER}.down.{ext}")),
        down,
    )
    .unwrap();
    std::fs::write(
        dir.path().join(format!("{LATE}_late.up.{ext}")),
        late(server),
    )
    .unwrap();
    // The database that applied the originals goes on from its own history.
    let out = ok(
        &old.run_cli(dir.path(), &["migrate"]),
        "migrate the old database",
    );
    assert!(out.contains("Applied 2 in batch"), "{out}");
    let expected = schema_of(&old, dir.path());

    // A new database: the baseline, then the late file and 50; the originals are never
    // pending.
    let new = Place::new(database).await.unwrap();
    let status = ok(
        &new.run_cli(dir.path(), &["status"]),
        "status of a new database",
    );
    assert!(
        status.contains("baseline of 10–40, 4 migrations"),
        "{status}"
    );
    assert!(!status.contains("m10"), "{status}");
    let out = ok(
        &new.run_cli(dir.path(), &["migrate"]),
        "migrate a new database",
    );
    assert!(out.contains("Applied 3 in batch"), "{out}");
    let order: Vec<&str> = out.lines().filter(|l| l.starts_with("applied ")).collect();
    assert!(
        order[0].contains("40 squash") && order[1].contains("35 late"),
        "{out}"
    );
    assert_eq!(schema_of(&new, dir.path()), expected);
    if let Some(db) = new.db().filter(|db| db.server == Server::Postgres) {
        // The partitioned table's index reaches its partition, as on the old database (a
        // dump lists the parent's index alone).
        let sql =
            "SELECT indexrelid::regclass::text FROM pg_index JOIN pg_class c ON c.oid = indrelid \
                   WHERE c.relname = 'a_events_2024' AND indisvalid";
        assert_eq!(db.strings(sql).await.len(), 1, "{sql}");
    }
    let dump = ok(&new.run_cli(dir.path(), &["dump"]), "dump");
    assert!(
        dump.ends_with("-- applied versions\n-- 35 late\n-- 40 squash\n-- 50 m50\n"),
        "{dump}"
    );
    let out = ok(&new.run_cli(dir.path(), &["migrate"]), "migrate again");
    assert!(out.contains("Nothing to migrate"), "{out}");
    // Nothing below the baseline to go back to.
    let stderr = fails_with(
        &new.run_cli(dir.path(), &["to", "30"]),
        "IRREVERSIBLE_MIGRATION",
        "below the baseline",
    );
    assert!(stderr.contains("B40__squash"), "{stderr}");
    // An edited baseline is refused by its checksum; the originals are not run again.
    let edited = match server {
        Some(Server::Mongo) => {
            text.replacen("\"commands\": [", "\"commands\": [{\"create\": \"x\"}, ", 1)
        }
        _ => format!("{text}\nCREATE TABLE x (id INT);\n"),
    };
    std::fs::write(&baseline, &edited).unwrap();
    let stderr = fails_with(
        &new.run_cli(dir.path(), &["migrate"]),
        "CHECKSUM_MISMATCH",
        "an edited baseline",
    );
    assert!(stderr.contains("B40__squash"), "{stderr}");
    std::fs::write(&baseline, &text).unwrap();

    // The originals archived: a new database is built the same, and the old one goes on.
    let archived = scratch_dir();
    for file in std::fs::read_dir(dir.path()).unwrap() {
        let name = file.unwrap().file_name().into_string().unwrap();
        let original = VERSIONS.iter().any(|v| name.starts_with(&format!("{v}_")));
        if !original {
            std::fs::copy(dir.path().join(&name), archived.path().join(&name)).unwrap();
        }
    }
    let newer = Place::new(database).await.unwrap();
    ok(
        &newer.run_cli(archived.path(), &["migrate"]),
        "migrate without the originals",
    );
    assert_eq!(schema_of(&newer, archived.path()), expected);
    let out = ok(
        &old.run_cli(archived.path(), &["migrate"]),
        "the old database, archived",
    );
    assert!(out.contains("Nothing to migrate"), "{out}");
    let status = ok(
        &old.run_cli(archived.path(), &["status"]),
        "status, archived",
    );
    assert_eq!(status.matches("squashed").count(), 4, "{status}");

    // A database at version 20 whose files 30 and 40 were archived: refused, nothing run.
    let behind = Place::new(database).await.unwrap();
    ok(&behind.run_cli(dir.path(), &["to", "20"]), "to 20");
    let stderr = fails_with(
        &behind.run_cli(archived.path(), &["migrate"]),
        "MISSING_MIGRATION",
        "a database inside the baseline",
    );
    assert!(stderr.contains("30, 40"), "{stderr}");
    let out = ok(
        &behind.run_cli(dir.path(), &["migrate"]),
        "with the files back",
    );
    assert!(out.contains("Applied 4 in batch"), "{out}");
    assert_eq!(schema_of(&behind, dir.path()), expected);
}

/// On a database without transactional DDL a baseline that fails leaves a `running` record,
/// resolved as any migration's: `resolve V --rolled-back`, then run again.
async fn a_baseline_that_failed_half_way_is_resolved_like_any_migration(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let mongo = place.db().is_some_and(|db| db.server == Server::Mongo);
    let dir = scratch_dir();
    let (file, broken, fixed) = match mongo {
        true => (
            "B2__squash.json",
            r#"{"squashes": [1, 2], "commands": [{"create": "a"}, {"noSuchCommand": 1}]}"#,
            r#"{"squashes": [1, 2], "commands": [{"create": "b"}]}"#,
        ),
        false => (
            "B2__squash.sql",
            "-- dirthara:squashes 1,2\nCREATE TABLE a (id INT);\nCREATE TABLE a (id INT);\n",
            "-- dirthara:squashes 1,2\nCREATE TABLE b (id INT);\n",
        ),
    };
    std::fs::write(dir.path().join(file), broken).unwrap();
    fails_with(
        &place.run_cli(dir.path(), &["migrate"]),
        "MIGRATION_FAILED",
        "the baseline",
    );
    let stderr = fails_with(
        &place.run_cli(dir.path(), &["migrate"]),
        "DIRTY_MIGRATION",
        "dirty",
    );
    assert!(stderr.contains("resolve 2"), "{stderr}");
    let status = ok(&place.run_cli(dir.path(), &["status"]), "status");
    assert!(
        status.contains("dirty (baseline of 1–2, 2 migrations)"),
        "{status}"
    );
    ok(
        &place.run_cli(dir.path(), &["resolve", "2", "--rolled-back"]),
        "resolve",
    );
    // What it made by hand is cleared by hand, as for any migration.
    match place.db() {
        Some(db) if mongo => db
            .mongo()
            .await
            .collection::<::mongodb::bson::Document>("a")
            .drop()
            .await
            .unwrap(),
        _ => place.execute("DROP TABLE a").await,
    }
    std::fs::write(dir.path().join(file), fixed).unwrap();
    let out = ok(&place.run_cli(dir.path(), &["migrate"]), "migrate again");
    assert!(out.contains("Applied 1 in batch"), "{out}");
    // `resolve` of a version inside the baseline is refused: it has no record of its own.
    let stderr = fails_with(
        &place.run_cli(dir.path(), &["resolve", "1", "--accept-checksum"]),
        "CONFIG_ERROR",
        "resolve inside the baseline",
    );
    assert!(stderr.contains("in the baseline"), "{stderr}");
}

/// A migration up to V on another connection: its database is not in the baseline, so
/// squash is refused and writes nothing.
#[tokio::test]
async fn squash_is_refused_over_a_migration_on_another_connection() {
    let dir = scratch_dir();
    let home = format!("sqlite:{}", dir.path().join("home.db").display());
    let other = format!("sqlite:{}", dir.path().join("other.db").display());
    let migrations = dir.path().join("m");
    std::fs::create_dir(&migrations).unwrap();
    std::fs::write(migrations.join("1_a.up.sql"), "CREATE TABLE a (id INT);").unwrap();
    let elsewhere = "-- dirthara:connection other\nCREATE TABLE b (id INT);";
    std::fs::write(migrations.join("2_b.up.sql"), elsewhere).unwrap();
    let config = dir.path().join("dirthara.toml");
    let connections = format!("[connections]\ndefault = \"{home}\"\nother = \"{other}\"\n");
    std::fs::write(&config, connections).unwrap();
    let run = |args: &[&str]| {
        let mut cmd = support::dirthara_command();
        cmd.arg("--config")
            .arg(&config)
            .arg("--dir")
            .arg(&migrations);
        cmd.arg("--no-lock").args(args).output().unwrap()
    };
    ok(&run(&["migrate"]), "migrate");
    let stderr = fails_with(&run(&["squash", "--to", "2"]), "CONFIG_ERROR", "squash");
    assert!(stderr.contains("runs on connection `other`"), "{stderr}");
    assert!(!migrations.join("B2__squash.sql").exists());
}
