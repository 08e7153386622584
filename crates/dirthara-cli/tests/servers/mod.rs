//! Throwaway databases on the test servers: one uniquely named database per test, dropped
//! afterwards. Without a server the test is skipped with a message, unless
//! `DIRTHARA_REQUIRE_SERVERS=1` (set by CI), where a missing server fails the run.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, MySqlConnection, PgConnection, Row};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Postgres,
    Mysql,
    Mongo,
}

impl Server {
    fn admin_url(self) -> String {
        match self {
            Server::Postgres => std::env::var("DIRTHARA_TEST_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into()),
            Server::Mysql => std::env::var("DIRTHARA_TEST_MYSQL_URL")
                .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/mysql".into()),
            Server::Mongo => std::env::var("DIRTHARA_TEST_MONGODB_URL")
                .unwrap_or_else(|_| "mongodb://127.0.0.1:27017/admin?directConnection=true".into()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Server::Postgres => "postgres",
            Server::Mysql => "mysql",
            Server::Mongo => "mongodb",
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
    /// A fresh database, or `None` (after saying so) when the server is not reachable.
    pub async fn create(server: Server) -> Option<TestDb> {
        let admin_url = server.admin_url();
        let name = format!("dirthara_t_{}_{}", std::process::id(), fastrand_suffix());
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
            let message = format!(
                "{} test server at {admin_url} is not usable ({error})",
                server.name()
            );
            if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() == Ok("1") {
                panic!("{message}; DIRTHARA_REQUIRE_SERVERS=1 requires it");
            }
            eprintln!(
                "SKIPPED: {message}; set DIRTHARA_TEST_{}_URL to run this test",
                server.name().to_uppercase()
            );
            return None;
        }
        Some(TestDb {
            server,
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        })
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
        // Drop runs outside async code: use a small runtime of our own on another thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                match server {
                    Server::Postgres => {
                        if let Ok(mut c) = PgConnection::connect(&admin_url).await {
                            let _ = c
                                .execute(
                                    format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str(),
                                )
                                .await;
                        }
                    }
                    Server::Mysql => {
                        if let Ok(mut c) = MySqlConnection::connect(&admin_url).await {
                            let _ = c
                                .execute(format!("DROP DATABASE IF EXISTS {name}").as_str())
                                .await;
                        }
                    }
                    Server::Mongo => {
                        if let Ok(client) = mongo_client(&admin_url).await {
                            let _ = client.database(&name).drop().await;
                        }
                    }
                }
            })
        })
        .join();
    }
}

pub async fn mongo_client(url: &str) -> mongodb::error::Result<mongodb::Client> {
    let mut options = mongodb::options::ClientOptions::parse(url).await?;
    options.server_selection_timeout = Some(std::time::Duration::from_secs(3));
    mongodb::Client::with_options(options)
}

fn fastrand_suffix() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{nanos:x}{n}")
}

/// A temporary migrations directory.
pub struct Migrations {
    pub dir: tempfile::TempDir,
}

impl Migrations {
    pub fn new() -> Self {
        Migrations {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn add(&self, version: i64, name: &str, up: &str, down: Option<&str>) -> &Self {
        self.add_as("sql", version, name, up, down)
    }

    /// Writes a migration with extension `ext` (`sql` or `json`).
    pub fn add_as(
        &self,
        ext: &str,
        version: i64,
        name: &str,
        up: &str,
        down: Option<&str>,
    ) -> &Self {
        let base = self.dir.path();
        match down {
            Some(down) => {
                std::fs::write(base.join(format!("{version}_{name}.up.{ext}")), up).unwrap();
                std::fs::write(base.join(format!("{version}_{name}.down.{ext}")), down).unwrap();
            }
            None => std::fs::write(base.join(format!("{version}_{name}.{ext}")), up).unwrap(),
        }
        self
    }

    /// `count` trivial MongoDB migrations, each creating its own collection.
    pub fn collections(count: i64) -> Self {
        let m = Migrations::new();
        for v in 1..=count {
            m.add_as(
                "json",
                v,
                &format!("c{v}"),
                &format!(r#"[{{"create": "c{v}"}}]"#),
                Some(&format!(r#"[{{"drop": "c{v}"}}]"#)),
            );
        }
        m
    }

    /// `count` trivial migrations, each creating its own table.
    pub fn tables(count: i64) -> Self {
        let m = Migrations::new();
        for v in 1..=count {
            m.add(
                v,
                &format!("t{v}"),
                &format!("CREATE TABLE t{v} (id INT)"),
                Some(&format!("DROP TABLE t{v}")),
            );
        }
        m
    }
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dirthara"))
}

/// `dirthara -d URL --dir DIR <args>` with a clean environment.
pub fn dirthara(url: &str, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.env_remove("DATABASE_URL")
        .env("NO_COLOR", "1")
        .arg("-d")
        .arg(url)
        .arg("--dir")
        .arg(dir)
        .args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("DIRTHARA_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The `applied` versions of a `--output json` run.
pub fn applied_versions(output: &Output) -> Vec<i64> {
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {:?}", text(output)));
    doc["applied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["version"].as_i64().unwrap())
        .collect()
}

/// Starts a runner with its output captured.
pub fn spawn(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child, killing it (and failing) if it runs past `limit`: a deadlock watchdog.
pub fn wait_with_watchdog(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "runner still running after {limit:?} (deadlock?): {:?}",
                text(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `unlock --output json` (built by `unlock`) until it reports the lock held; panics
/// after 20 s.
pub fn wait_until_held(mut unlock: impl FnMut() -> Command) {
    let started = Instant::now();
    loop {
        let out = unlock().output().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if doc["state"] == "held" {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the first runner never took the lock: {:?}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A PgBouncer of the test's own in `pool_mode = transaction`, in front of one test database
/// on the PostgreSQL test server; stopped on drop. The binary is `DIRTHARA_TEST_PGBOUNCER`,
/// else `pgbouncer` on the PATH, else `/usr/sbin/pgbouncer` (Debian's package).
pub struct PgBouncer {
    child: Child,
    port: u16,
    user: String,
    database: String,
    /// Holds the configuration and the log while the bouncer runs.
    dir: tempfile::TempDir,
}

impl PgBouncer {
    /// A bouncer for `db` with up to `pool_size` server sessions, or `None` (after saying so)
    /// when PgBouncer is not installed — a failure under `DIRTHARA_REQUIRE_SERVERS=1`.
    pub async fn start(db: &TestDb, pool_size: u32) -> Option<PgBouncer> {
        assert_eq!(
            db.server,
            Server::Postgres,
            "PgBouncer fronts PostgreSQL only"
        );
        let Some(binary) = pgbouncer_binary() else {
            let message = "PgBouncer is not installed (no `pgbouncer` on the PATH, no \
                           /usr/sbin/pgbouncer, DIRTHARA_TEST_PGBOUNCER unset)";
            if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() == Ok("1") {
                panic!(
                    "{message}; DIRTHARA_REQUIRE_SERVERS=1 requires it (apt-get install pgbouncer)"
                );
            }
            eprintln!("SKIPPED: {message}");
            return None;
        };
        let server = ServerAddress::parse(&db.url);
        // A port picked free a moment ago may be taken before the bouncer binds it: retry.
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = tempfile::tempdir().unwrap();
            write_config(dir.path(), &server, &db.name, port, pool_size);
            let mut cmd = Command::new(&binary);
            // PgBouncer refuses to run as root; `-u` makes it drop to another user.
            if running_as_root() {
                cmd.arg("-u").arg("postgres");
            }
            let log = std::fs::File::create(dir.path().join("pgbouncer.log")).unwrap();
            let child = cmd
                .arg(dir.path().join("pgbouncer.ini"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let mut bouncer = PgBouncer {
                child,
                port,
                user: server.user.clone(),
                database: db.name.clone(),
                dir,
            };
            if bouncer.wait_until_serving().await {
                return Some(bouncer);
            }
            last_log = bouncer.log();
        }
        panic!("PgBouncer did not start; its log:\n{last_log}");
    }

    /// The test database, through the bouncer.
    pub fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            self.user, self.port, self.database
        )
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }

    /// True once a query runs through the bouncer; false if it exited or never answered.
    async fn wait_until_serving(&mut self) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(mut c) = PgConnection::connect(&self.url()).await {
                if c.execute("SELECT 1").await.is_ok() {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pgbouncer_binary() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("DIRTHARA_TEST_PGBOUNCER") {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("pgbouncer"))
        .chain([PathBuf::from("/usr/sbin/pgbouncer")]);
    on_path.into_iter().find(|p| p.is_file())
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where the PostgreSQL test server listens and who logs in, from a test database URL.
struct ServerAddress {
    user: String,
    password: String,
    host: String,
    port: u16,
}

impl ServerAddress {
    fn parse(url: &str) -> ServerAddress {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let (userinfo, hostport) = authority
            .rsplit_once('@')
            .unwrap_or(("postgres", authority));
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "5432"));
        ServerAddress {
            user: user.to_string(),
            password: password.to_string(),
            host: host.to_string(),
            port: port
                .parse()
                .expect("a numeric port in the PostgreSQL test URL"),
        }
    }
}

fn write_config(dir: &Path, server: &ServerAddress, database: &str, port: u16, pool_size: u32) {
    let userlist = dir.join("userlist.txt");
    std::fs::write(
        &userlist,
        format!("\"{}\" \"{}\"\n", server.user, server.password),
    )
    .unwrap();
    // Clients are trusted (the test server trusts local logins too); the userlist supplies
    // the password PgBouncer logs in to the server with. sqlx sends extra_float_digits and
    // may send options at startup, which PgBouncer refuses unless told to ignore them.
    let ini = format!(
        "[databases]\n\
         {database} = host={host} port={server_port} dbname={database}\n\
         \n\
         [pgbouncer]\n\
         listen_addr = 127.0.0.1\n\
         listen_port = {port}\n\
         unix_socket_dir =\n\
         auth_type = trust\n\
         auth_file = {userlist}\n\
         pool_mode = transaction\n\
         max_client_conn = 200\n\
         default_pool_size = {pool_size}\n\
         max_db_connections = {pool_size}\n\
         ignore_startup_parameters = extra_float_digits,options\n\
         logfile =\n\
         pidfile =\n",
        host = server.host,
        server_port = server.port,
        userlist = userlist.display(),
    );
    std::fs::write(dir.join("pgbouncer.ini"), ini).unwrap();
    // Readable by the user PgBouncer drops to when started as root.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
