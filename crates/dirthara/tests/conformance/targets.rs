//! The real databases the conformance checks run against: a SQLite file, or a throwaway
//! database on a test server, each with the lock strategy of its row.

use dirthara::{Config, LockHolder, LockStrategy, Locking, Migrator};
use dirthara_test_kit::servers::{Server, TestDb};
use sqlx::{Connection, Executor};

use super::checks::Target;
use super::lock_checks::LockTarget;

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

/// What the lock checks run: steps that take time or note that they ran, and reads of the
/// database from connections of their own.
impl LockTarget for Row {
    fn sleep(&self, ms: u64) -> String {
        match &self.database {
            // MongoDB has no portable sleep (`sleep` is a test command): inserts that take
            // about as long, 20 empty documents a millisecond on the test server.
            Database::Server(db) if db.server == Server::Mongo => {
                let documents = vec!["{}"; (ms * 20) as usize].join(", ");
                format!(r#"[{{"insert": "ballast", "documents": [{documents}]}}]"#)
            }
            // SQLite has no sleep: a recursive count that takes about as long.
            Database::Sqlite(_) => format!(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {}) \
                 SELECT max(x) FROM c",
                ms * 8_000
            ),
            Database::Server(db) => db.server.sleep(ms as f64 / 1000.0),
        }
    }

    fn join(&self, steps: &[&str]) -> String {
        if !self.is_mongo() {
            return steps.join(";\n");
        }
        // JSON command files: one array of every step's commands.
        let commands: Vec<&str> = (steps.iter())
            .map(|s| s.trim().trim_start_matches('[').trim_end_matches(']'))
            .collect();
        format!("[{}]", commands.join(", "))
    }

    fn note_run(&self, version: i64) -> String {
        match self.is_mongo() {
            true => format!(r#"[{{"insert": "runs", "documents": [{{"v": {version}}}]}}]"#),
            false => format!("INSERT INTO runs VALUES ({version})"),
        }
    }

    fn lose_lock(&self, intruder: bool) -> String {
        let server = match &self.database {
            Database::Server(db) => Some(db.server),
            Database::Sqlite(_) => None,
        };
        let (now, later) = match server {
            None => ("julianday('now')", "julianday('now') + 10 / 1440.0"),
            Some(Server::Postgres) => ("now()", "now() + interval '10 minutes'"),
            Some(_) => ("UTC_TIMESTAMP(6)", "UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE"),
        };
        match (self.strategy(), server) {
            (LockStrategy::Session, Some(Server::Postgres)) => {
                "SELECT pg_advisory_unlock_all()".into()
            }
            (LockStrategy::Session, _) => "DO RELEASE_ALL_LOCKS()".into(),
            (_, Some(Server::Mongo)) => {
                let delete =
                    format!(r#"{{"delete": "{LEASE}", "deletes": [{{"q": {{}}, "limit": 0}}]}}"#);
                let later = std::time::SystemTime::now() + std::time::Duration::from_secs(600);
                let insert = format!(
                    r#"{{"insert": "{LEASE}", "documents": [{{"_id": "dirthara:migrations", "ownerId": "intruder", "hostname": "other-host", "pid": 1, "operation": "migrate", "acquiredAt": {{"$date": "{}"}}, "expiresAt": {{"$date": "{}"}}}}]}}"#,
                    dirthara::format_timestamp(std::time::SystemTime::now()),
                    dirthara::format_timestamp(later),
                );
                match intruder {
                    true => format!("[{delete}, {insert}]"),
                    false => format!("[{delete}]"),
                }
            }
            _ => {
                let delete = format!("DELETE FROM {LEASE}");
                match intruder {
                    true => format!(
                        "{delete};\nINSERT INTO {LEASE} (id, owner_id, hostname, pid, operation, \
                         acquired_at, expires_at) VALUES ('dirthara:migrations', 'intruder', \
                         'other-host', 1, 'migrate', {now}, {later})"
                    ),
                    false => delete,
                }
            }
        }
    }

    fn one_check_at_a_time(&self) -> bool {
        self.is_mongo()
    }

    fn fails_at_once(&self) -> String {
        match self.is_mongo() {
            true => r#"[{"noSuchCommand": 1}]"#.into(),
            false => "SELECT * FROM no_such_table".into(),
        }
    }

    async fn runs(&self) -> usize {
        self.count("runs", "").await
    }

    async fn recorded(&self) -> usize {
        self.count(HISTORY, "state IN ('applied', 'running')").await
    }

    async fn break_release(&self, holder: &LockHolder) -> bool {
        let Database::Server(db) = &self.database else {
            // Deleting a SQLite file's lease table waits for the running step to commit.
            return false;
        };
        match (self.strategy(), db.server, holder.session_id) {
            (LockStrategy::Session, Server::Postgres, Some(pid)) => {
                db.execute(&format!("SELECT pg_terminate_backend({pid})"))
                    .await
            }
            (LockStrategy::Session, Server::Mysql, Some(id)) => {
                db.execute(&format!("KILL {id}")).await
            }
            // A release that finds no lease document only warns (LOCK_LEASE_EXPIRED).
            (_, Server::Mongo, _) => return false,
            (LockStrategy::Lease, _, _) => db.execute(&format!("DROP TABLE {LEASE}")).await,
            _ => return false,
        }
        true
    }

    async fn lease_owner(&self) -> Option<String> {
        if let Database::Server(db) = &self.database {
            if db.server == Server::Mongo {
                let lease = db
                    .mongo()
                    .await
                    .collection::<mongodb::bson::Document>(LEASE);
                let found = lease.find_one(mongodb::bson::doc! {}).await.unwrap()?;
                return found.get_str("ownerId").ok().map(str::to_string);
            }
        }
        let owners = self
            .texts(&format!("SELECT owner_id FROM {LEASE}"))
            .await
            .unwrap_or_default();
        owners.into_iter().next()
    }
}

/// The history table and the lease table the checks' migrators use (the defaults).
const HISTORY: &str = "dirthara_migrations";
const LEASE: &str = "dirthara_migrations_lock";

impl Row {
    /// The rows of `table` matching `filter` (SQL; on MongoDB the same filter on `state`);
    /// 0 when the table is not there yet.
    async fn count(&self, table: &str, filter: &str) -> usize {
        if let Database::Server(db) = &self.database {
            if db.server == Server::Mongo {
                let collection = db
                    .mongo()
                    .await
                    .collection::<mongodb::bson::Document>(table);
                let filter = match filter.is_empty() {
                    true => mongodb::bson::doc! {},
                    false => mongodb::bson::doc! { "state": { "$in": ["applied", "running"] } },
                };
                return collection.count_documents(filter).await.unwrap() as usize;
            }
        }
        let filter = match filter.is_empty() {
            true => String::new(),
            false => format!(" WHERE {filter}"),
        };
        let sql = format!("SELECT CAST(COUNT(*) AS CHAR(20)) FROM {table}{filter}");
        let sql = match &self.database {
            Database::Sqlite(_) => sql.replace("CHAR(20)", "TEXT"),
            Database::Server(db) if db.server == Server::Postgres => {
                sql.replace("CHAR(20)", "TEXT")
            }
            _ => sql,
        };
        match self.texts(&sql).await {
            Ok(rows) => rows.first().and_then(|n| n.parse().ok()).unwrap_or(0),
            Err(e) if is_missing_table(&e) => 0,
            Err(e) => panic!("{sql}: {e}"),
        }
    }

    /// The first column of every row of `sql`, as text.
    async fn texts(&self, sql: &str) -> Result<Vec<String>, sqlx::Error> {
        use sqlx::Row as _;
        let url = self.url();
        let rows = match &self.database {
            Database::Sqlite(_) => {
                let mut c = sqlx::SqliteConnection::connect(&url).await?;
                let rows = c.fetch_all(sql).await?;
                rows.iter().map(|r| r.try_get::<String, _>(0)).collect()
            }
            Database::Server(db) if db.server == Server::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await?;
                let rows = c.fetch_all(sql).await?;
                rows.iter().map(|r| r.try_get::<String, _>(0)).collect()
            }
            Database::Server(_) => {
                let mut c = sqlx::MySqlConnection::connect(&url).await?;
                let rows = c.fetch_all(sql).await?;
                rows.iter().map(|r| r.try_get::<String, _>(0)).collect()
            }
        };
        rows
    }
}

/// A query on a table that does not exist yet (before migration 1 created it).
fn is_missing_table(error: &sqlx::Error) -> bool {
    let message = error.to_string().to_ascii_lowercase();
    message.contains("no such table")
        || message.contains("unable to open database file")
        || message.contains("does not exist")
        || message.contains("doesn't exist")
}
