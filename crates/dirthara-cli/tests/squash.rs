//! `squash --to V` (issue 30), on PostgreSQL, MariaDB (Oracle MySQL in CI's MySQL lane),
//! SQLite and the MongoDB-compatible server. Each migration set is made so that the dump's
//! order (by kind, then name) would not run: a view on a view named after it, a table whose
//! default calls a function or that references a table named after it, a partition named
//! before its parent. The baseline must run anyway:
//! - a new database built from the baseline and the later files has the schema of one built
//!   from all the files, with the originals beside the baseline or archived;
//! - a database that applied the originals goes on from its own history, their files
//!   archived or not, and `status` shows them squashed;
//! - a database at a version inside the baseline whose files were archived is refused;
//! - squash is refused on a database not at V, and going below the baseline is refused.

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
    ],
    sqlite => Database::Sqlite => [
        a_new_database_built_from_the_baseline_has_the_schema_of_all_the_files,
    ],
    mongodb => Database::Server(Server::Mongo) => [
        a_new_database_built_from_the_baseline_has_the_schema_of_all_the_files,
    ],
}

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

/// The migrations up to the baseline (1–4) and the one after it (5), for `server`
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
    for (i, up) in originals.iter().enumerate() {
        let file = dir.path().join(format!("{}_m{}.up.{ext}", i + 1, i + 1));
        std::fs::write(file, up).unwrap();
    }

    // The database squashed from is built in two runs.
    ok(&old.run_cli(dir.path(), &["to", "2"]), "to 2");
    ok(&old.run_cli(dir.path(), &["migrate"]), "migrate");
    // Not at version 3: `to 3` would still reverse 4.
    let stderr = fails_with(
        &old.run_cli(dir.path(), &["squash", "--to", "3"]),
        "CONFIG_ERROR",
        "squash at the wrong version",
    );
    assert!(stderr.contains("not at version 3"), "{stderr}");
    assert!(!dir.path().join(format!("B3__squash.{ext}")).exists());

    let wrote = ok(&old.run_cli(dir.path(), &["squash", "--to", "4"]), "squash");
    assert!(wrote.contains("1–4, 4 migrations"), "{wrote}");
    assert!(wrote.contains("It holds no rows"), "{wrote}");
    let baseline = dir.path().join(format!("B4__squash.{ext}"));
    let text = std::fs::read_to_string(&baseline).unwrap();
    match server {
        Some(Server::Mongo) => assert!(text.contains(r#""squashes": ["#), "{text}"),
        _ => assert!(text.starts_with("-- dirthara:squashes 1,2,3,4\n"), "{text}"),
    }
    // Written again over itself: refused, the file kept.
    fails_with(
        &old.run_cli(dir.path(), &["squash", "--to", "4"]),
        "CONFIG_ERROR",
        "squash twice",
    );
    assert_eq!(std::fs::read_to_string(&baseline).unwrap(), text);

    std::fs::write(dir.path().join(format!("5_m5.up.{ext}")), after).unwrap();
    let down = match server {
        Some(Server::Mongo) => r#"[{"drop": "notes"}]"#,
        _ => "DROP TABLE notes;",
    };
    std::fs::write(dir.path().join(format!("5_m5.down.{ext}")), down).unwrap();
    // The database that applied the originals goes on from its own history.
    let out = ok(
        &old.run_cli(dir.path(), &["migrate"]),
        "migrate the old database",
    );
    assert!(out.contains("Applied 1 in batch"), "{out}");
    let expected = schema_of(&old, dir.path());

    // A new database: the baseline, then 5; the originals are never pending.
    let new = Place::new(database).await.unwrap();
    let status = ok(
        &new.run_cli(dir.path(), &["status"]),
        "status of a new database",
    );
    assert!(status.contains("baseline of 1–4, 4 migrations"), "{status}");
    assert!(!status.contains("m1"), "{status}");
    let out = ok(
        &new.run_cli(dir.path(), &["migrate"]),
        "migrate a new database",
    );
    assert!(out.contains("Applied 2 in batch"), "{out}");
    assert_eq!(schema_of(&new, dir.path()), expected);
    let dump = ok(&new.run_cli(dir.path(), &["dump"]), "dump");
    assert!(
        dump.ends_with("-- applied versions\n-- 4 squash\n-- 5 m5\n"),
        "{dump}"
    );
    let out = ok(&new.run_cli(dir.path(), &["migrate"]), "migrate again");
    assert!(out.contains("Nothing to migrate"), "{out}");
    // Nothing below the baseline to go back to.
    let stderr = fails_with(
        &new.run_cli(dir.path(), &["to", "3"]),
        "IRREVERSIBLE_MIGRATION",
        "below the baseline",
    );
    assert!(stderr.contains("B4__squash"), "{stderr}");

    // The originals archived: a new database is built the same, and the old one goes on.
    let archived = scratch_dir();
    for file in [
        format!("B4__squash.{ext}"),
        format!("5_m5.up.{ext}"),
        format!("5_m5.down.{ext}"),
    ] {
        std::fs::copy(dir.path().join(&file), archived.path().join(&file)).unwrap();
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

    // A database at version 2 whose files 3 and 4 were archived: refused, nothing run.
    let behind = Place::new(database).await.unwrap();
    ok(&behind.run_cli(dir.path(), &["to", "2"]), "to 2");
    let stderr = fails_with(
        &behind.run_cli(archived.path(), &["migrate"]),
        "MISSING_MIGRATION",
        "a database inside the baseline",
    );
    assert!(stderr.contains("3, 4"), "{stderr}");
    let out = ok(
        &behind.run_cli(dir.path(), &["migrate"]),
        "with the files back",
    );
    assert!(out.contains("Applied 3 in batch"), "{out}");
    assert_eq!(schema_of(&behind, dir.path()), expected);
}
