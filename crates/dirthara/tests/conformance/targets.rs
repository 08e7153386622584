//! The real databases the conformance checks run against: a SQLite file, or a throwaway
//! database on a test server, each with the lock strategy of its row.

use dirthara::{Config, LockStrategy, Locking, Migrator};
use dirthara_test_kit::servers::{Server, TestDb};
use sqlx::{Connection, Executor};

use super::checks::Target;

enum Database {
    Sqlite(tempfile::TempDir),
    Server(TestDb),
}

/// One row of the table: a database and the `locking` it is migrated with.
pub(crate) struct Row {
    database: Database,
    locking: Locking,
}

impl Row {
    /// A new SQLite file.
    pub(crate) async fn sqlite(locking: Locking) -> Option<Row> {
        let dir = tempfile::Builder::new()
            .prefix("dirthara-conformance-")
            .tempdir()
            .expect("create a temporary directory");
        Some(Row {
            database: Database::Sqlite(dir),
            locking,
        })
    }

    /// A new database on `server`; `None` (the test skips) when the server is not there.
    pub(crate) async fn server(server: Server, locking: Locking) -> Option<Row> {
        Some(Row {
            database: Database::Server(TestDb::create(server).await?),
            locking,
        })
    }

    /// MongoDB's migrations are JSON commands; the others', SQL.
    fn is_mongo(&self) -> bool {
        matches!(&self.database, Database::Server(db) if db.server == Server::Mongo)
    }

    fn url(&self) -> String {
        match &self.database {
            Database::Sqlite(dir) => format!("sqlite:{}", dir.path().join("c.db").display()),
            Database::Server(db) => db.url.clone(),
        }
    }
}

impl Target for Row {
    fn transactional_ddl(&self) -> bool {
        match &self.database {
            Database::Sqlite(_) => true,
            Database::Server(db) => db.server.transactional_ddl(),
        }
    }

    fn strategy(&self) -> LockStrategy {
        let session_lock = match &self.database {
            Database::Sqlite(_) => false,
            Database::Server(db) => db.server.has_session_lock(),
        };
        match self.locking {
            Locking::Off => LockStrategy::Off,
            Locking::Session => LockStrategy::Session,
            Locking::Auto if session_lock => LockStrategy::Session,
            _ => LockStrategy::Lease,
        }
    }

    fn migrator(&self, configure: &dyn Fn(&mut Config)) -> Migrator {
        let mut config = Config::with_url(self.url());
        config.locking = self.locking;
        configure(&mut config);
        Migrator::new(config)
    }

    async fn drop_table(&self, table: &str) {
        match &self.database {
            Database::Server(db) => db.drop_table(table).await,
            Database::Sqlite(_) => {
                let mut c = sqlx::SqliteConnection::connect(&self.url()).await.unwrap();
                c.execute(format!("DROP TABLE {table}").as_str())
                    .await
                    .unwrap();
            }
        }
    }

    fn extension(&self) -> &'static str {
        if self.is_mongo() {
            "json"
        } else {
            "sql"
        }
    }

    fn create(&self, table: &str) -> String {
        if self.is_mongo() {
            format!(r#"[{{"create": "{table}"}}]"#)
        } else {
            format!("CREATE TABLE {table} (id INT)")
        }
    }

    fn create_changed(&self, table: &str) -> String {
        if self.is_mongo() {
            format!(r#"[{{"create": "{table}", "capped": false}}]"#)
        } else {
            format!("CREATE TABLE {table} (id BIGINT)")
        }
    }

    fn drop(&self, table: &str) -> String {
        if self.is_mongo() {
            format!(r#"[{{"drop": "{table}"}}]"#)
        } else {
            format!("DROP TABLE {table}")
        }
    }

    fn broken(&self, table: &str) -> String {
        if self.is_mongo() {
            // The second insert fails on the duplicate key, after the collection was made.
            format!(
                r#"[{{"create": "{table}"}}, {{"insert": "{table}", "documents": [{{"_id": 1}}, {{"_id": 1}}]}}]"#
            )
        } else {
            format!("CREATE TABLE {table} (id INT);\nSELECT * FROM no_such_table;")
        }
    }
}
