//! Throwaway databases on the test servers: one uniquely named database per test (or bench
//! scenario), dropped afterwards. Without a server a test is skipped with a message, unless
//! `DIRTHARA_REQUIRE_SERVERS=1` (set by CI), where a missing server fails the run. The servers
//! are `DIRTHARA_TEST_POSTGRES_URL`, `DIRTHARA_TEST_MYSQL_URL` and `DIRTHARA_TEST_MONGODB_URL`,
//! by default the local trust-auth ones. A test that stops or restarts a server makes one of
//! its own instead (the CLI tests' `support::private_server`).

use sqlx::{Connection, Executor, MySqlConnection, PgConnection, Row};

mod user;
pub use user::TestUser;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Postgres,
    Mysql,
    Mongo,
}

impl Server {
    /// The URL of the server's administrative database, where test databases are created.
    pub fn admin_url(self) -> String {
        match self {
            Server::Postgres => std::env::var("DIRTHARA_TEST_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into()),
            Server::Mysql => std::env::var("DIRTHARA_TEST_MYSQL_URL")
                .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/mysql".into()),
            Server::Mongo => std::env::var("DIRTHARA_TEST_MONGODB_URL")
                .unwrap_or_else(|_| "mongodb://127.0.0.1:27017/admin?directConnection=true".into()),
        }
    }

    /// The server as a person names it (the test servers are PostgreSQL, MariaDB and a
    /// MongoDB-compatible one).
    pub fn label(self) -> &'static str {
        match self {
            Server::Postgres => "PostgreSQL",
            Server::Mysql => "MariaDB",
            Server::Mongo => "MongoDB",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Server::Postgres => "postgres",
            Server::Mysql => "mysql",
            Server::Mongo => "mongodb",
        }
    }

    /// A failed step leaves nothing behind: DDL is transactional (PostgreSQL), as opposed to
    /// committed statement by statement (MySQL/MariaDB) or outside transactions (MongoDB).
    pub fn transactional_ddl(self) -> bool {
        match self {
            Server::Postgres => true,
            Server::Mysql | Server::Mongo => false,
        }
    }

    /// The server has a session lock (dirthara's native strategy there); MongoDB's native
    /// strategy is the lease.
    pub fn has_session_lock(self) -> bool {
        match self {
            Server::Postgres | Server::Mysql => true,
            Server::Mongo => false,
        }
    }

    /// SQL that sleeps for `seconds` on this server.
    pub fn sleep(self, seconds: f64) -> String {
        match self {
            Server::Postgres => format!("SELECT pg_sleep({seconds})"),
            Server::Mysql => format!("SELECT SLEEP({seconds})"),
            // MongoDB's `sleep` is a test command (the server needs enableTestCommands).
            Server::Mongo => format!(
                r#"[{{"sleep": 1, "millis": {}}}]"#,
                (seconds * 1000.0) as u64
            ),
        }
    }
}

/// A database created for one test.
pub struct TestDb {
    pub server: Server,
    pub url: String,
    pub name: String,
    admin_url: String,
}

fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let path_start = base[scheme_end..]
        .find('/')
        .map(|i| i + scheme_end)
        .unwrap_or(base.len());
    format!("{}/{database}{query}", &base[..path_start])
}

impl TestDb {
    /// A fresh database, or `None` (after saying so) when the server is not reachable; under
    /// `DIRTHARA_REQUIRE_SERVERS=1` an unreachable server fails the test instead.
    pub async fn create(server: Server) -> Option<TestDb> {
        match TestDb::try_create(server).await {
            Ok(db) => Some(db),
            Err(message) => {
                if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() == Ok("1") {
                    panic!("{message}; DIRTHARA_REQUIRE_SERVERS=1 requires it");
                }
                eprintln!(
                    "SKIPPED: {message}; set DIRTHARA_TEST_{}_URL to run this test",
                    server.name().to_uppercase()
                );
                None
            }
        }
    }

    /// A fresh database, or why the server cannot give one.
    pub async fn try_create(server: Server) -> Result<TestDb, String> {
        TestDb::try_create_at(server, &server.admin_url()).await
    }

    /// A fresh database on the server whose administrative database is `admin_url` (a
    /// private server of a test's own, say), or why it cannot give one.
    pub async fn try_create_at(server: Server, admin_url: &str) -> Result<TestDb, String> {
        let name = format!("dirthara_t_{}_{}", std::process::id(), unique_suffix());
        TestDb::try_create_named(server, admin_url, name).await
    }

    /// Another database on this one's server, named `<this name>_<suffix>` (as unique as
    /// this one's name), dropped on drop as this one is: the tenant databases of a fleet, all
    /// matched by the glob `<this name>_*` and by nothing of another test.
    pub async fn sibling(&self, suffix: &str) -> TestDb {
        let name = format!("{}_{suffix}", self.name);
        TestDb::try_create_named(self.server, &self.admin_url, name)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn try_create_named(
        server: Server,
        admin_url: &str,
        name: String,
    ) -> Result<TestDb, String> {
        let admin_url = admin_url.to_string();
        let created = async {
            match server {
                Server::Postgres => {
                    let mut c = PgConnection::connect(&admin_url).await?;
                    c.execute(format!("CREATE DATABASE {name}").as_str())
                        .await?;
                }
                Server::Mysql => {
                    let mut c = MySqlConnection::connect(&admin_url).await?;
                    c.execute(format!("CREATE DATABASE {name}").as_str())
                        .await?;
                }
                Server::Mongo => {
                    // MongoDB creates a database on first write; check the server answers.
                    let protocol = |e: mongodb::error::Error| sqlx::Error::Protocol(e.to_string());
                    let client = mongo_client(&admin_url).await.map_err(protocol)?;
                    client
                        .database("admin")
                        .run_command(mongodb::bson::doc! { "ping": 1 })
                        .await
                        .map_err(protocol)?;
                }
            }
            Ok::<_, sqlx::Error>(())
        }
        .await;
        if let Err(error) = created {
            return Err(format!(
                "{} test server at {admin_url} is not usable ({error})",
                server.name()
            ));
        }
        Ok(TestDb {
            server,
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        })
    }

    /// The server's `host:port`, as the URL names it.
    pub fn host_port(&self) -> String {
        let rest = self.url.split_once("://").map_or(&*self.url, |(_, r)| r);
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        host_port.to_string()
    }

    /// The server's port, as the URL names it (the protocol's default when it names none).
    pub fn port(&self) -> u16 {
        let default = match self.server {
            Server::Postgres => 5432,
            Server::Mysql => 3306,
            Server::Mongo => 27017,
        };
        self.host_port()
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(default)
    }

    pub async fn execute(&self, sql: &str) {
        match self.server {
            Server::Postgres => {
                let mut c = PgConnection::connect(&self.url).await.unwrap();
                c.execute(sql).await.unwrap();
            }
            Server::Mysql => {
                let mut c = MySqlConnection::connect(&self.url).await.unwrap();
                c.execute(sql).await.unwrap();
            }
            Server::Mongo => panic!("no SQL on MongoDB"),
        }
    }

    /// Whether a statement whose text contains `fragment` is running on this database in
    /// another session (PostgreSQL's `pg_stat_activity`, MySQL's process list).
    pub async fn is_running(&self, fragment: &str) -> bool {
        let like = fragment.replace('\'', "''");
        let sql = match self.server {
            Server::Postgres => format!(
                "SELECT pid::text FROM pg_stat_activity WHERE datname = current_database() \
                 AND query LIKE '%{like}%' AND pid <> pg_backend_pid()"
            ),
            Server::Mysql => format!(
                "SELECT CAST(ID AS CHAR) FROM information_schema.PROCESSLIST WHERE DB = '{}' \
                 AND INFO LIKE '%{like}%' AND ID <> CONNECTION_ID()",
                self.name
            ),
            Server::Mongo => panic!("no statements on MongoDB"),
        };
        !self.strings(&sql).await.is_empty()
    }

    /// Drops a table (a collection on MongoDB), as an operator would by hand.
    pub async fn drop_table(&self, table: &str) {
        if self.server == Server::Mongo {
            let collection = self
                .mongo()
                .await
                .collection::<mongodb::bson::Document>(table);
            collection.drop().await.unwrap();
            return;
        }
        self.execute(&format!("DROP TABLE {table}")).await;
    }

    /// This test's MongoDB database.
    pub async fn mongo(&self) -> mongodb::Database {
        mongo_client(&self.url).await.unwrap().database(&self.name)
    }

    /// The tables of this database (PostgreSQL: its public schema; MongoDB: collections).
    pub async fn tables(&self) -> Vec<String> {
        if self.server == Server::Mongo {
            let mut names = self.mongo().await.list_collection_names().await.unwrap();
            names.sort();
            return names;
        }
        let sql = match self.server {
            Server::Postgres => "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
            _ => "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1",
        };
        self.strings(sql).await
    }

    /// A statement still running on the server outlives its client's death until it ends
    /// (MySQL/MariaDB, and PostgreSQL before 14), as opposed to the server ending the session,
    /// and with it the session lock, once it notices the client is gone (PostgreSQL 14+, within
    /// dirthara's 1 s `client_connection_check_interval`, which older servers lack).
    pub async fn orphaned_statements_run_on(&self) -> bool {
        match self.server {
            Server::Mysql => true,
            Server::Mongo => false,
            Server::Postgres => {
                let version = self.strings("SHOW server_version_num").await;
                version[0]
                    .parse::<u32>()
                    .expect("server_version_num is a number")
                    < 140_000
            }
        }
    }

    /// Whether the MySQL-protocol server is MariaDB (its `VERSION()` says so), as opposed to
    /// Oracle MySQL: where the two differ (texts, columns, what they report), a test asserts
    /// what the server it runs on does.
    pub async fn is_mariadb(&self) -> bool {
        self.server == Server::Mysql
            && self.strings("SELECT VERSION()").await[0]
                .to_ascii_lowercase()
                .contains("mariadb")
    }

    pub async fn strings(&self, sql: &str) -> Vec<String> {
        match self.server {
            Server::Postgres => {
                let mut c = PgConnection::connect(&self.url).await.unwrap();
                c.fetch_all(sql)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<String, _>(0))
                    .collect()
            }
            Server::Mongo => panic!("no SQL on MongoDB"),
            Server::Mysql => {
                let mut c = MySqlConnection::connect(&self.url).await.unwrap();
                // MariaDB reports some computed text columns as VARBINARY.
                c.fetch_all(sql)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| {
                        r.try_get::<String, _>(0)
                            .unwrap_or_else(|_| String::from_utf8(r.get::<Vec<u8>, _>(0)).unwrap())
                    })
                    .collect()
            }
        }
    }

    /// (version, batch, state) of every history record.
    pub async fn history(&self) -> Vec<(i64, i64, String)> {
        if self.server == Server::Mongo {
            use mongodb::bson::{doc, Document};
            let mut cursor = self
                .mongo()
                .await
                .collection::<Document>("dirthara_migrations")
                .find(doc! {})
                .sort(doc! { "_id": 1 })
                .await
                .unwrap();
            let mut rows = Vec::new();
            while cursor.advance().await.unwrap() {
                let d = cursor.deserialize_current().unwrap();
                rows.push((
                    d.get_i64("_id").unwrap(),
                    d.get_i64("batch").unwrap(),
                    d.get_str("state").unwrap().to_string(),
                ));
            }
            return rows;
        }
        let sql = "SELECT CONCAT(CAST(version AS CHAR(20)), ' ', CAST(batch AS CHAR(20)), ' ', state) FROM dirthara_migrations ORDER BY version";
        let sql = if self.server == Server::Postgres {
            "SELECT version::text || ' ' || batch::text || ' ' || state FROM dirthara_migrations ORDER BY version"
        } else {
            sql
        };
        self.strings(sql)
            .await
            .into_iter()
            .map(|line| {
                let parts: Vec<&str> = line.split(' ').collect();
                (
                    parts[0].parse().unwrap(),
                    parts[1].parse().unwrap(),
                    parts[2].to_string(),
                )
            })
            .collect()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (server, admin_url, name) = (self.server, self.admin_url.clone(), self.name.clone());
        // Drop may run inside async code: use a small runtime of our own on another thread.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                match server {
                    Server::Postgres => {
                        let mut c = PgConnection::connect(&admin_url).await?;
                        c.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                            .await?;
                    }
                    Server::Mysql => {
                        let mut c = MySqlConnection::connect(&admin_url).await?;
                        c.execute(format!("DROP DATABASE IF EXISTS {name}").as_str())
                            .await?;
                    }
                    Server::Mongo => {
                        let protocol =
                            |e: mongodb::error::Error| sqlx::Error::Protocol(e.to_string());
                        let client = mongo_client(&admin_url).await.map_err(protocol)?;
                        client.database(&name).drop().await.map_err(protocol)?;
                    }
                }
                Ok::<_, sqlx::Error>(())
            })
            .map_err(|e| e.to_string())
        })
        .join();
        // A database left behind is no test failure, but it should not go unnoticed.
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!(
                "warning: could not drop test database {} ({dropped:?}); drop it by hand",
                self.name
            );
        }
    }
}

pub async fn mongo_client(url: &str) -> mongodb::error::Result<mongodb::Client> {
    let mut options = mongodb::options::ClientOptions::parse(url).await?;
    options.server_selection_timeout = Some(std::time::Duration::from_secs(3));
    mongodb::Client::with_options(options)
}

/// Unique within this process, and unlikely to repeat across processes with the same pid.
fn unique_suffix() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{nanos:x}{n}")
}
