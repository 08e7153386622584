//! Migrations written in Rust against the real servers: each receives its own kind of
//! connection, and runs in the transaction that records it.

mod support;

use dirthara::{Config, Migrator};
use dirthara::{Connection, RustMigration, StepError};
use support::servers::{Server, TestDb};

struct CreateAndFill;

#[async_trait::async_trait]
impl RustMigration for CreateAndFill {
    fn version(&self) -> i64 {
        1
    }
    fn name(&self) -> &str {
        "create_and_fill"
    }
    fn revision(&self) -> &str {
        "1"
    }
    async fn up(&self, conn: Connection<'_>) -> Result<(), StepError> {
        match conn {
            Connection::Postgres(conn) => {
                use sqlx::Executor;
                conn.execute(
                    "CREATE TABLE filled (n INT); INSERT INTO filled SELECT generate_series(1, 10)",
                )
                .await?;
            }
            Connection::Mongo { db, session } => {
                use mongodb::bson::doc;
                let docs: Vec<_> = (1..=10).map(|n| doc! { "n": n }).collect();
                let filled = db.collection::<mongodb::bson::Document>("filled");
                match session {
                    Some(session) => filled.insert_many(docs).session(session).await?,
                    None => filled.insert_many(docs).await?,
                };
            }
            _ => return Err("unexpected connection".into()),
        }
        Ok(())
    }
}

fn migrator(url: &str) -> Migrator {
    let mut config = Config::with_url(url);
    config.directories.clear();
    Migrator::new(config).with_rust_migration(CreateAndFill)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_migration_runs_on_postgres_in_the_transaction_that_records_it() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let report = migrator(&db.url).migrate().await.unwrap();
    assert_eq!(report.applied[0].name, "create_and_fill");
    assert_eq!(
        db.strings("SELECT count(*)::text FROM filled").await,
        vec!["10"]
    );
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_migration_runs_on_mongodb_with_its_transaction_session() {
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let report = migrator(&db.url).migrate().await.unwrap();
    assert_eq!(report.applied.len(), 1);
    let count = db
        .mongo()
        .await
        .collection::<mongodb::bson::Document>("filled")
        .count_documents(mongodb::bson::doc! {})
        .await
        .unwrap();
    assert_eq!(count, 10);
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
}
