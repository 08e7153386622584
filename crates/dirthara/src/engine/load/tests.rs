//! A step is parsed once per process: loading keeps what it parsed a MySQL `DELIMITER` script
//! or a JSON command file into, and the backends send that, never parsing the text again.

use std::sync::Arc;

use dirthara_test_kit::servers::{Server, TestDb};

use crate::config::Config;
use crate::engine::Migrator;
use crate::migration::{Direction, DownSteps, Migration, ParsedStep, StepFormat};
use crate::source::sql::ClientScript;

const PROCEDURE: &str =
    "DELIMITER $$\nCREATE PROCEDURE p() BEGIN SELECT 1; END$$\nDELIMITER ;\nCALL p();";

fn migrator(url: &str, migrations: Vec<Migration>) -> Migrator {
    let mut config = Config::with_url(url);
    config.directories = Vec::new();
    config
        .connections
        .insert("docs".into(), "mongodb://127.0.0.1:1/docs".into());
    Migrator::new(config).with_migrations(migrations)
}

fn commands(version: i64, text: &str) -> Migration {
    let mut migration = Migration::new(version, "docs", text);
    migration.format = StepFormat::MongoCommands;
    migration.connection = "docs".into();
    migration
}

/// Loading touches no database: the parsed forms are there before anything connects.
#[test]
fn loading_keeps_what_it_parsed_each_step_into() {
    let loaded = migrator(
        "mysql://app@127.0.0.1:1/app",
        vec![
            Migration::new(1, "proc", PROCEDURE).with_down("DELIMITER $$\nDROP PROCEDURE p$$"),
            Migration::new(2, "plain", "CREATE TABLE t (id INT)").with_down("DROP TABLE t"),
            commands(3, r#"[{"create": "users"}, {"drop": "old"}]"#),
        ],
    )
    .load()
    .unwrap();
    let script = |m: &Migration, direction| m.parsed_in(direction).get::<ClientScript>().cloned();
    assert_eq!(
        script(&loaded[0], Direction::Up),
        ClientScript::parse(PROCEDURE).unwrap()
    );
    let down = script(&loaded[0], Direction::Down).expect("the down script is kept too");
    let texts: Vec<_> = down.statements().into_iter().map(|s| s.text).collect();
    assert_eq!(texts, ["DROP PROCEDURE p"]);
    // A step the tokenizer splits as the server reads it has nothing more to keep.
    assert_eq!(script(&loaded[1], Direction::Up), None);
    assert_eq!(script(&loaded[1], Direction::Down), None);
    let documents = loaded[2].parsed_in(Direction::Up);
    let documents = documents.get::<crate::backend::CommandDocuments>();
    assert_eq!(
        documents.map(|d| d.0.clone()),
        Some(vec![
            mongodb::bson::doc! { "create": "users" },
            mongodb::bson::doc! { "drop": "old" },
        ])
    );
}

/// Runs `migration` with its up step's parsed form replaced by `planted`: what a step sends
/// is what loading parsed (its text here says something else).
async fn run_with_planted(url: &str, migration: Migration, planted: ParsedStep) {
    let migrator = migrator(url, vec![migration]);
    let mut loaded = migrator.load().unwrap();
    loaded[0].set_parsed(Direction::Up, planted);
    let migrator = migrator.with_preloaded(DownSteps::Read, Arc::new(loaded));
    migrator.migrate().await.unwrap();
}

#[tokio::test]
async fn mariadb_runs_the_statements_loading_split_the_script_into() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let text = "DELIMITER $$\nCREATE TABLE from_text (id INT)$$";
    let planted = ClientScript::parse("DELIMITER $$\nCREATE TABLE from_load (id INT)$$");
    let planted = ParsedStep::new(planted.unwrap().unwrap());
    run_with_planted(&db.url, Migration::new(1, "t", text), planted).await;
    let tables = db.tables().await;
    assert!(tables.contains(&"from_load".to_string()), "{tables:?}");
    assert!(!tables.contains(&"from_text".to_string()), "{tables:?}");
}

#[tokio::test]
async fn mongodb_runs_the_documents_loading_parsed_the_file_into() {
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let mut migration = commands(1, r#"[{"create": "from_text"}]"#);
    migration.connection = crate::migration::DEFAULT_CONNECTION.into();
    let planted = crate::backend::parse_commands(r#"[{"create": "from_load"}]"#).unwrap();
    run_with_planted(&db.url, migration, planted).await;
    let collections = db.tables().await;
    assert!(
        collections.contains(&"from_load".to_string()),
        "{collections:?}"
    );
    assert!(
        !collections.contains(&"from_text".to_string()),
        "{collections:?}"
    );
}
