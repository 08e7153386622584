//! `drift` (issue 30), on PostgreSQL, MariaDB (Oracle MySQL in CI's MySQL lane), SQLite and
//! the MongoDB-compatible server: the snapshot each command that changed the schema leaves
//! makes `drift` clean after `migrate`, `down`, `refresh`, `baseline` and `resolve`; a column
//! added, an index dropped and a view changed by hand are each named; `--accept` takes the
//! schema as it is; `--against FILE` compares with a dump; a history without a snapshot says
//! so; `schema_snapshot = off` takes none and removes the one kept, still writing the
//! `dump_schema` file. Over 12 PostgreSQL tenant schemas, only the drifted ones are named.

mod support;

use std::path::Path;
use std::process::Output;

use ::mongodb::bson::{doc, Document};
use support::scenarios::{Database, Place};
use support::servers::{Server, TestDb};
use support::{dirthara, scratch_dir, text};

crate::scenario_tests! {
    postgres => Database::Server(Server::Postgres) => [
        drift_is_clean_after_every_command_and_names_each_change_made_by_hand,
        a_baseline_leaves_a_snapshot_of_the_schema_it_adopts,
        with_schema_snapshot_off_none_is_taken_and_a_stale_one_is_removed,
    ],
    mariadb => Database::Server(Server::Mysql) => [
        drift_is_clean_after_every_command_and_names_each_change_made_by_hand,
        a_baseline_leaves_a_snapshot_of_the_schema_it_adopts,
        with_schema_snapshot_off_none_is_taken_and_a_stale_one_is_removed,
    ],
    sqlite => Database::Sqlite => [
        drift_is_clean_after_every_command_and_names_each_change_made_by_hand,
        a_baseline_leaves_a_snapshot_of_the_schema_it_adopts,
        with_schema_snapshot_off_none_is_taken_and_a_stale_one_is_removed,
    ],
    mongodb => Database::Server(Server::Mongo) => [
        drift_is_clean_after_every_command_and_names_each_change_made_by_hand,
        a_baseline_leaves_a_snapshot_of_the_schema_it_adopts,
        with_schema_snapshot_off_none_is_taken_and_a_stale_one_is_removed,
    ],
}

fn ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// `drift` passes and says so.
fn assert_clean(place: &Place, dir: &Path, after: &str) {
    let out = place.run_cli(dir, &["drift"]);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success() && stdout.starts_with("No drift: "),
        "after {after}: {stdout}\n{stderr}"
    );
}

fn is_mongo(place: &Place) -> bool {
    place.db().is_some_and(|db| db.server == Server::Mongo)
}

/// The view of migration 2, as its file says (`narrow`: as a changed file says).
fn view(mongo: bool, narrow: bool) -> String {
    match (mongo, narrow) {
        (true, false) => r#"{"create": "named_items", "viewOn": "items", "pipeline": [{"$match": {"name": {"$exists": true}}}]}"#.into(),
        (true, true) => r#"{"create": "named_items", "viewOn": "items", "pipeline": [{"$match": {"name": "x"}}]}"#.into(),
        (false, false) => "CREATE VIEW named_items AS SELECT id, name FROM items WHERE name <> ''".into(),
        (false, true) => "CREATE VIEW named_items AS SELECT id FROM items".into(),
    }
}

/// Three migrations: a table (collection) with an index, a view of it, another table.
fn write_migrations(dir: &Path, mongo: bool) -> [String; 3] {
    let ups = if mongo {
        [
            r#"[{"create": "items"}, {"createIndexes": "items", "indexes": [{"key": {"name": 1}, "name": "items_name"}]}]"#.to_string(),
            format!("[{}]", view(true, false)),
            r#"[{"create": "notes"}]"#.to_string(),
        ]
    } else {
        [
            "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL);\n\
             CREATE INDEX items_name ON items (name);\n"
                .to_string(),
            format!("{};\n", view(false, false)),
            "CREATE TABLE notes (id INT PRIMARY KEY);\n".to_string(),
        ]
    };
    let downs = match mongo {
        true => [
            r#"[{"drop": "items"}]"#,
            r#"[{"drop": "named_items"}]"#,
            r#"[{"drop": "notes"}]"#,
        ],
        false => [
            "DROP TABLE items;",
            "DROP VIEW named_items;",
            "DROP TABLE notes;",
        ],
    };
    let ext = if mongo { "json" } else { "sql" };
    for (i, name) in ["items", "named", "notes"].iter().enumerate() {
        let v = i + 1;
        std::fs::write(dir.join(format!("{v}_{name}.up.{ext}")), &ups[i]).unwrap();
        std::fs::write(dir.join(format!("{v}_{name}.down.{ext}")), downs[i]).unwrap();
    }
    ups
}

/// Runs each command of a JSON migration on MongoDB, outside dirthara.
async fn mongo_commands(db: &TestDb, json: &str) {
    let commands: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
    let mongo = db.mongo().await;
    for command in commands {
        let command: Document = ::mongodb::bson::to_document(&command).unwrap();
        mongo.run_command(command).await.unwrap();
    }
}

/// The view redefined by hand, as the changed file of migration 2 says.
async fn narrow_the_view(place: &Place) {
    match place.db() {
        Some(db) if db.server == Server::Mongo => {
            let mongo = db.mongo().await;
            mongo
                .run_command(doc! { "drop": "named_items" })
                .await
                .unwrap();
            mongo_commands(db, &format!("[{}]", view(true, true))).await;
        }
        _ => {
            place.execute("DROP VIEW named_items").await;
            place.execute(&view(false, true)).await;
        }
    }
}

async fn drift_is_clean_after_every_command_and_names_each_change_made_by_hand(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let mongo = is_mongo(&place);
    let mysql = place.db().is_some_and(|db| db.server == Server::Mysql);
    let dir = scratch_dir();
    write_migrations(dir.path(), mongo);

    // Before any command took a snapshot there is none, and drift says so.
    let out = place.run_cli(dir.path(), &["drift"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Error [SCHEMA_SNAPSHOT_MISSING]"),
        "{stderr}"
    );
    assert!(stderr.contains("dirthara drift --accept"), "{stderr}");

    ok(&place.run_cli(dir.path(), &["migrate"]));
    assert_clean(&place, dir.path(), "migrate");
    ok(&place.run_cli(dir.path(), &["down"]));
    assert_clean(&place, dir.path(), "down");
    ok(&place.run_cli(dir.path(), &["migrate"]));
    assert_clean(&place, dir.path(), "migrate again");
    ok(&place.run_cli(dir.path(), &["refresh"]));
    assert_clean(&place, dir.path(), "refresh");

    // A hotfix done right: the view changed by hand and its file changed to match; `resolve`
    // accepts the file, and the schema it left is the reference.
    narrow_the_view(&place).await;
    let ext = if mongo { "json" } else { "sql" };
    let narrowed = match mongo {
        true => format!("[{}]", view(true, true)),
        false => format!("{};\n", view(false, true)),
    };
    std::fs::write(dir.path().join(format!("2_named.up.{ext}")), narrowed).unwrap();
    ok(&place.run_cli(dir.path(), &["resolve", "2", "--accept-checksum"]));
    assert_clean(&place, dir.path(), "resolve");

    // Changes by hand: a column added (a collection, on MongoDB), an index dropped, the view
    // changed back.
    match place.db() {
        Some(db) if db.server == Server::Mongo => {
            let mongo = db.mongo().await;
            mongo.create_collection("stray").await.unwrap();
            let items = mongo.collection::<Document>("items");
            items.drop_index("items_name").await.unwrap();
            mongo
                .run_command(doc! { "drop": "named_items" })
                .await
                .unwrap();
            mongo_commands(db, &format!("[{}]", view(true, false))).await;
        }
        _ => {
            place
                .execute("ALTER TABLE items ADD COLUMN extra INT")
                .await;
            match mysql {
                true => place.execute("DROP INDEX items_name ON items").await,
                false => place.execute("DROP INDEX items_name").await,
            }
            place.execute("DROP VIEW named_items").await;
            place.execute(&view(false, false)).await;
        }
    }
    let out = place.run_cli(dir.path(), &["drift"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("Error [SCHEMA_DRIFT]"), "{stderr}");
    let expected: &[(&str, &str)] = match (mongo, mysql) {
        (true, _) => &[
            ("collection stray", "added"),
            ("view named_items", "changed"),
            ("index items.items_name", "missing"),
        ],
        // MySQL keeps an index in its table's CREATE TABLE.
        (_, true) => &[("table items", "changed"), ("view named_items", "changed")],
        _ => &[
            ("table items", "changed"),
            ("view named_items", "changed"),
            ("index items.items_name", "missing"),
        ],
    };
    let objects = match expected.len() {
        2 => "2 objects differ",
        _ => "3 objects differ",
    };
    assert!(stderr.contains(objects), "{stderr}");
    for (object, _) in expected {
        assert!(
            stdout.contains(&format!("{object}: ")),
            "{object}:\n{stdout}"
        );
    }
    let added: Vec<&str> = stdout.lines().filter(|l| l.starts_with('+')).collect();
    let removed: Vec<&str> = stdout.lines().filter(|l| l.starts_with('-')).collect();
    if !mongo {
        assert!(added.iter().any(|l| l.contains("extra")), "{stdout}");
    }
    assert!(removed.iter().any(|l| l.contains("items_name")), "{stdout}");

    let json = place.run_cli(dir.path(), &["drift", "--output", "json"]);
    assert_eq!(json.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["clean"], false, "{doc}");
    assert_eq!(doc["reference"]["kind"], "snapshot", "{doc}");
    assert_eq!(doc["reference"]["version"], 3, "{doc}");
    let mut found: Vec<(String, String)> = (doc["drift"].as_array().unwrap().iter())
        .map(|d| {
            let field = |k: &str| d[k].as_str().unwrap().to_string();
            (field("object"), field("change"))
        })
        .collect();
    let mut wanted: Vec<(String, String)> = (expected.iter())
        .map(|(o, c)| (o.to_string(), c.to_string()))
        .collect();
    found.sort();
    wanted.sort();
    assert_eq!(found, wanted, "{doc}");

    // A dump compared with instead: the database matches one taken now.
    let dumped = ok(&place.run_cli(dir.path(), &["dump"]));
    let file = dir.path().join("schema.dump");
    std::fs::write(&file, dumped).unwrap();
    let against = ok(&place.run_cli(dir.path(), &["drift", "--against", file.to_str().unwrap()]));
    assert!(against.starts_with("No drift: "), "{against}");

    // The changes were meant: taken as the reference, drift is clean again.
    let accepted = ok(&place.run_cli(dir.path(), &["drift", "--accept"]));
    assert!(
        accepted.starts_with("Took the schema of `default`"),
        "{accepted}"
    );
    assert!(accepted.contains("at version 3"), "{accepted}");
    assert_clean(&place, dir.path(), "drift --accept");

    // A command that failed takes no snapshot: migration 4 applied, 5 failed, and what 4 did
    // is drift until someone looks (the applied versions say why).
    let (four, five) = match mongo {
        true => (r#"[{"create": "four"}]"#, r#"[{"noSuchCommand": 1}]"#),
        false => (
            "CREATE TABLE four (id INT);",
            "INSERT INTO no_such_table VALUES (1);",
        ),
    };
    std::fs::write(dir.path().join(format!("4_four.up.{ext}")), four).unwrap();
    std::fs::write(dir.path().join(format!("5_five.up.{ext}")), five).unwrap();
    let failed = place.run_cli(dir.path(), &["migrate"]);
    assert_eq!(failed.status.code(), Some(1), "{:?}", text(&failed));
    let out = place.run_cli(dir.path(), &["drift"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let kind = if mongo { "collection" } else { "table" };
    assert!(
        stdout.contains(&format!(
            "{kind} four: in the database, not in the snapshot"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("applied versions: changed\n"), "{stdout}");
    assert!(stdout.contains("+-- 4 four"), "{stdout}");
}

async fn a_baseline_leaves_a_snapshot_of_the_schema_it_adopts(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let mongo = is_mongo(&place);
    let dir = scratch_dir();
    let ups = write_migrations(dir.path(), mongo);
    // The schema made by hand, as the migrations would have made it; then adopted.
    for up in &ups[..2] {
        match place.db() {
            Some(db) if mongo => mongo_commands(db, up).await,
            _ => {
                for statement in up.split(';').filter(|s| !s.trim().is_empty()) {
                    place.execute(statement).await;
                }
            }
        }
    }
    ok(&place.run_cli(dir.path(), &["baseline", "2"]));
    assert_clean(&place, dir.path(), "baseline");
    ok(&place.run_cli(dir.path(), &["migrate"]));
    assert_clean(&place, dir.path(), "the migrate after the baseline");
}

/// `--schema-snapshot off`: a command that changes the schema takes no snapshot and removes
/// the one an earlier command kept, which no longer describes the schema, so `drift` says it
/// has none instead of reporting the command's own changes as drift; `dump_schema` is still
/// written, and `drift --against` it is clean.
async fn with_schema_snapshot_off_none_is_taken_and_a_stale_one_is_removed(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let dir = scratch_dir();
    write_migrations(dir.path(), is_mongo(&place));
    ok(&place.run_cli(dir.path(), &["to", "1"]));
    assert_clean(&place, dir.path(), "to 1");

    let elsewhere = scratch_dir();
    let file = elsewhere.path().join("schema.sql");
    let file_arg = file.to_str().unwrap();
    let off = ["--schema-snapshot", "off", "--dump-schema", file_arg];
    ok(&place.run_cli(dir.path(), &[&off[..], &["migrate"]].concat()));
    let out = place.run_cli(dir.path(), &["drift"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Error [SCHEMA_SNAPSHOT_MISSING]")
            && stderr.contains("`schema_snapshot = off` removed it"),
        "{stdout}\n{stderr}"
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("named_items"), "{written}");
    ok(&place.run_cli(dir.path(), &["drift", "--against", file_arg]));

    // Taken again when asked for; a command with snapshots on keeps it up to date.
    ok(&place.run_cli(dir.path(), &["drift", "--accept"]));
    ok(&place.run_cli(dir.path(), &["down"]));
    assert_clean(&place, dir.path(), "down with snapshots on");
    ok(&place.run_cli(dir.path(), &["--schema-snapshot", "off", "migrate"]));
    let out = place.run_cli(dir.path(), &["drift"]);
    let (_, stderr) = text(&out);
    assert!(stderr.contains("SCHEMA_SNAPSHOT_MISSING"), "{stderr}");
}

/// Over 12 tenant schemas migrated as one fleet, two changed by hand: `drift` names those two
/// alone, with the totals, and fails; JSON holds every target.
#[tokio::test(flavor = "multi_thread")]
async fn over_12_postgres_tenant_schemas_drift_names_only_the_drifted_ones() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let schemas: String = (1..=12)
        .map(|i| format!("CREATE SCHEMA tenant_{i}; "))
        .collect();
    db.execute(&schemas).await;
    let dir = scratch_dir();
    write_migrations(dir.path(), false);
    let fleet = |args: &[&str]| {
        let mut all = vec!["--schemas", "tenant_*"];
        all.extend(args);
        dirthara(&db.url, dir.path(), &all).output().unwrap()
    };
    ok(&fleet(&["migrate"]));
    let clean = ok(&fleet(&["drift"]));
    assert!(
        clean.contains("12 target(s): 12 clean, 0 drifted, 0 failed, 0 skipped"),
        "{clean}"
    );

    db.execute("ALTER TABLE tenant_1.items ADD COLUMN extra INT")
        .await;
    db.execute("DROP INDEX tenant_11.items_name").await;
    // tenant_1 is the canary, and drifted: a finding, which neither stops the rest of the
    // fleet after the canary nor counts toward --max-failures (1 by default).
    let out = fleet(&["--canary", "1", "drift"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let mut named: Vec<&str> = (stdout.lines())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|word| word.starts_with("tenant_"))
        .collect();
    named.sort();
    assert_eq!(named, ["tenant_1", "tenant_11"], "{stdout}");
    assert!(stdout.contains("table items changed"), "{stdout}");
    assert!(
        stdout.contains("index items.items_name missing"),
        "{stdout}"
    );
    assert!(
        stdout.contains("12 target(s): 10 clean, 2 drifted, 0 failed, 0 skipped"),
        "{stdout}"
    );
    assert!(
        stderr.contains("2 of 12 target(s) drifted from their schema snapshot"),
        "{stderr}"
    );

    let json = fleet(&["drift", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["totals"]["drifted"], 2, "{doc}");
    let drifted: Vec<&str> = (doc["targets"].as_array().unwrap().iter())
        .filter(|t| t["outcome"] == "failed")
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(drifted.len(), 2, "{doc}");
    assert!(
        drifted.contains(&"tenant_1") && drifted.contains(&"tenant_11"),
        "{doc}"
    );

    // `--against` one file cannot fit every tenant: refused over a fleet.
    let refused = fleet(&["drift", "--against", "schema.sql"]);
    let (_, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`drift --against` does not run over a fleet"),
        "{stderr}"
    );
    // Accepted everywhere, the fleet is clean.
    let accepted = ok(&fleet(&["drift", "--accept"]));
    assert!(
        accepted.contains("12 target(s): 12 took their schema as the reference, 0 failed"),
        "{accepted}"
    );
    let clean = ok(&fleet(&["drift"]));
    assert!(clean.contains("12 clean, 0 drifted"), "{clean}");
}
