//! `dump` and `dump --check` (issue 30), on PostgreSQL, MariaDB (Oracle MySQL in CI's MySQL
//! lane), SQLite and the MongoDB-compatible server: two databases built by the same files,
//! one in a single run and one in two runs after other objects came and went, dump byte for
//! byte the same, without dirthara's own tables; `dump --check` passes against that dump,
//! and fails with `SCHEMA_MISMATCH` and the lines that differ once the database is changed by
//! hand.

mod support;

use std::path::Path;
use std::process::Output;

use support::scenarios::{Database, Place};
use support::servers::Server;
use support::{scratch_dir, text};

crate::scenario_tests! {
    postgres => Database::Server(Server::Postgres) => [
        databases_built_by_the_same_files_dump_the_same_and_a_change_by_hand_fails_the_check,
        dump_schema_is_written_after_each_command_that_changed_the_schema,
    ],
    mariadb => Database::Server(Server::Mysql) => [
        databases_built_by_the_same_files_dump_the_same_and_a_change_by_hand_fails_the_check,
        dump_schema_is_written_after_each_command_that_changed_the_schema,
    ],
    sqlite => Database::Sqlite => [
        databases_built_by_the_same_files_dump_the_same_and_a_change_by_hand_fails_the_check,
        dump_schema_is_written_after_each_command_that_changed_the_schema,
    ],
    mongodb => Database::Server(Server::Mongo) => [
        databases_built_by_the_same_files_dump_the_same_and_a_change_by_hand_fails_the_check,
        dump_schema_is_written_after_each_command_that_changed_the_schema,
    ],
}

fn is_mongo(place: &Place) -> bool {
    place.db().is_some_and(|db| db.server == Server::Mongo)
}

fn run(place: &Place, dir: &Path, args: &[&str]) -> Output {
    place.run_cli(dir, args)
}

fn ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// Two migrations: a table (collection) with an index, then a view of it; on SQL databases
/// also a table whose key counts up on its own (its counter is not schema).
fn write_migrations(dir: &Path, database: Database) {
    let mongo = database == Database::Server(Server::Mongo);
    let files: [(&str, &str); 4] = if mongo {
        [
            (
                "1_items.up.json",
                r#"[{"create": "items", "validator": {"name": {"$type": "string"}}},
                    {"createIndexes": "items", "indexes": [{"key": {"name": 1, "id": -1}, "name": "items_name"}]}]"#,
            ),
            ("1_items.down.json", r#"[{"drop": "items"}]"#),
            (
                "2_named.up.json",
                r#"[{"create": "named_items", "viewOn": "items", "pipeline": [{"$match": {"name": {"$exists": true}}}]}]"#,
            ),
            ("2_named.down.json", r#"[{"drop": "named_items"}]"#),
        ]
    } else {
        [
            (
                "1_items.up.sql",
                "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL);\n\
                 CREATE INDEX items_name ON items (name);\n",
            ),
            ("1_items.down.sql", "DROP TABLE items;\n"),
            (
                "2_named.up.sql",
                "CREATE VIEW named_items AS SELECT id, name FROM items WHERE name <> '';\n",
            ),
            ("2_named.down.sql", "DROP VIEW named_items;\n"),
        ]
    };
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let counted = match database {
        Database::Server(Server::Postgres) => "id SERIAL PRIMARY KEY",
        Database::Server(Server::Mysql) => "id INT AUTO_INCREMENT PRIMARY KEY",
        Database::Sqlite => "id INTEGER PRIMARY KEY AUTOINCREMENT",
        Database::Server(Server::Mongo) => return,
    };
    let up = format!("CREATE TABLE counted ({counted}, note VARCHAR(10));\n");
    std::fs::write(dir.join("3_counted.up.sql"), up).unwrap();
    std::fs::write(dir.join("3_counted.down.sql"), "DROP TABLE counted;\n").unwrap();
}

/// Runs `sql` on a SQL database, or makes (and, with `drop`, drops) a collection on MongoDB.
async fn by_hand(place: &Place, sql: &str, collection: &str, drop: bool) {
    match place {
        Place::Server(db) if db.server == Server::Mongo => {
            let mongo = db.mongo().await;
            mongo.create_collection(collection).await.unwrap();
            if drop {
                mongo
                    .collection::<::mongodb::bson::Document>(collection)
                    .drop()
                    .await
                    .unwrap();
            }
        }
        _ => place.execute(sql).await,
    }
}

async fn databases_built_by_the_same_files_dump_the_same_and_a_change_by_hand_fails_the_check(
    database: Database,
) {
    let (Some(one), Some(two)) = (Place::new(database).await, Place::new(database).await) else {
        return;
    };
    let mongo = is_mongo(&one);
    let dir = scratch_dir();
    write_migrations(dir.path(), database);

    // One database in one run; the other in two, after an object came and went (it moves
    // OIDs and row ids on, and leaves nothing behind).
    ok(&run(&one, dir.path(), &["migrate"]));
    by_hand(
        &two,
        "CREATE TABLE churn (id INT); DROP TABLE churn",
        "churn",
        true,
    )
    .await;
    ok(&run(&two, dir.path(), &["to", "1"]));
    ok(&run(&two, dir.path(), &["migrate"]));

    // Rows counted in one database only: its counter moves on, its schema does not.
    if !mongo {
        by_hand(
            &two,
            "INSERT INTO counted (note) VALUES ('a'), ('b')",
            "",
            false,
        )
        .await;
    }

    let dumped = ok(&run(&one, dir.path(), &["dump"]));
    assert_eq!(ok(&run(&two, dir.path(), &["dump"])), dumped);
    assert!(dumped.starts_with("-- dirthara schema dump\n"), "{dumped}");
    let versions = match mongo {
        true => "-- applied versions\n-- 1 items\n-- 2 named\n",
        false => "-- applied versions\n-- 1 items\n-- 2 named\n-- 3 counted\n",
    };
    assert!(dumped.ends_with(versions), "{dumped}");
    let (table, view, index) = match mongo {
        true => (
            "-- object collection items\n",
            "-- object view named_items\n",
            "-- object index items.items_name\n",
        ),
        false => (
            "-- object table items\n",
            "-- object view named_items\n",
            "-- object index items.items_name\n",
        ),
    };
    for header in [table, view] {
        assert!(dumped.contains(header), "{header} not in\n{dumped}");
    }
    // MySQL keeps an index in its table's CREATE TABLE; the others list it apart.
    let mysql = one.db().is_some_and(|db| db.server == Server::Mysql);
    assert_eq!(dumped.contains(index), !mysql, "{dumped}");
    assert!(
        !dumped.contains("dirthara_migrations"),
        "dirthara's own tables: {dumped}"
    );

    let file = dir.path().join("schema.dump");
    std::fs::write(&file, &dumped).unwrap();
    let file_arg = file.to_str().unwrap();
    let matched = ok(&run(&two, dir.path(), &["dump", "--check", file_arg]));
    assert!(matched.starts_with("The schema matches "), "{matched}");

    // A change by hand: a column added (a collection made, on MongoDB).
    by_hand(
        &two,
        "ALTER TABLE items ADD COLUMN extra INT",
        "stray",
        false,
    )
    .await;
    let refused = run(&two, dir.path(), &["dump", "--check", file_arg]);
    let (stdout, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("Error [SCHEMA_MISMATCH]"), "{stderr}");
    assert!(stderr.contains("1 object differs"), "{stderr}");
    match mongo {
        true => assert!(
            stdout.contains("collection stray: in the database, not in the file\n+{"),
            "{stdout}"
        ),
        false => {
            assert!(stdout.starts_with("table items: changed\n@@ "), "{stdout}");
            let added: Vec<&str> = stdout.lines().filter(|l| l.starts_with('+')).collect();
            assert!(added.iter().any(|l| l.contains("extra")), "{stdout}");
        }
    }
    let json = run(
        &two,
        dir.path(),
        &["dump", "--check", file_arg, "--output", "json"],
    );
    assert_eq!(json.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["matches"], false);
    let drift = doc["drift"].as_array().unwrap();
    assert_eq!(drift.len(), 1, "{doc}");
    let expected = match mongo {
        true => ("collection stray", "added"),
        false => ("table items", "changed"),
    };
    assert_eq!(
        (drift[0]["object"].as_str(), drift[0]["change"].as_str()),
        (Some(expected.0), Some(expected.1))
    );

    // The first database was never touched: it still matches.
    ok(&run(&one, dir.path(), &["dump", "--check", file_arg]));
}

async fn dump_schema_is_written_after_each_command_that_changed_the_schema(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let dir = scratch_dir();
    write_migrations(dir.path(), database);
    let file = dir.path().join("db/schema.sql");
    let flag = ["--dump-schema", file.to_str().unwrap()];
    let with_flag = |command: &str| {
        let mut args = flag.to_vec();
        args.push(command);
        ok(&run(&place, dir.path(), &args));
    };
    with_flag("migrate");
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written, ok(&run(&place, dir.path(), &["dump"])));

    // A command that changed nothing leaves the file alone.
    std::fs::write(&file, "left alone").unwrap();
    with_flag("migrate");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "left alone");

    // One that changed the schema but built the same one leaves the file as it was (its
    // time too).
    std::fs::write(&file, &written).unwrap();
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();
    with_flag("refresh");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        before
    );

    // One that changed the schema writes it again, as it is now.
    with_flag("down");
    let after_down = std::fs::read_to_string(&file).unwrap();
    assert_eq!(after_down, ok(&run(&place, dir.path(), &["dump"])));
    assert_ne!(after_down, written);
    // Nothing is left beside it.
    let beside: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
}

/// Over a fleet, `{target}` in `dump_schema` gives each target its file; without it, only
/// the first target's schema is written.
#[tokio::test(flavor = "multi_thread")]
async fn over_postgres_tenant_schemas_dump_schema_writes_each_targets_file() {
    let Some(db) = support::servers::TestDb::create(Server::Postgres).await else {
        return;
    };
    db.execute("CREATE SCHEMA tenant_1; CREATE SCHEMA tenant_2; CREATE SCHEMA tenant_3")
        .await;
    let dir = scratch_dir();
    write_migrations(dir.path(), Database::Server(Server::Postgres));
    let each = dir.path().join("schemas/{target}.sql");
    let first = dir.path().join("first.sql");
    let fleet = |args: &[&str]| {
        let mut all = vec!["--schemas", "tenant_*"];
        all.extend(args);
        support::dirthara(&db.url, dir.path(), &all)
            .output()
            .unwrap()
    };
    ok(&fleet(&[
        "--dump-schema",
        each.to_str().unwrap(),
        "to",
        "1",
    ]));
    for i in 1..=3 {
        let path = dir.path().join(format!("schemas/tenant_{i}.sql"));
        let written = std::fs::read_to_string(path).unwrap();
        assert!(written.contains(&format!("tenant_{i}.items")), "{written}");
        let others = (1..=3).filter(|j| *j != i);
        assert!(
            others
                .map(|j| format!("tenant_{j}."))
                .all(|o| !written.contains(&o)),
            "{written}"
        );
        assert!(
            written.ends_with("-- applied versions\n-- 1 items\n"),
            "{written}"
        );
    }
    ok(&fleet(&[
        "--dump-schema",
        first.to_str().unwrap(),
        "migrate",
    ]));
    let written = std::fs::read_to_string(&first).unwrap();
    assert!(written.contains("tenant_1."), "{written}");
    assert!(
        !written.contains("tenant_2.") && !written.contains("tenant_3."),
        "{written}"
    );
}
