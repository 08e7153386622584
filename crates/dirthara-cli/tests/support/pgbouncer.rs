//! A PgBouncer of the test's own, in front of one test database.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, PgConnection};

use super::scratch_dir;
use super::servers::{Server, TestDb};

/// A PgBouncer of the test's own in `pool_mode = transaction`, in front of one test database
/// on the PostgreSQL test server; stopped on drop. The binary is `DIRTHARA_TEST_PGBOUNCER`,
/// else `pgbouncer` on the PATH, else `/usr/sbin/pgbouncer` (Debian's package).
pub(crate) struct PgBouncer {
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
    pub(crate) async fn start(db: &TestDb, pool_size: u32) -> Option<PgBouncer> {
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
            let dir = scratch_dir();
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
    pub(crate) fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            self.user, self.port, self.database
        )
    }

    pub(crate) fn log(&self) -> String {
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

pub(crate) fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where the PostgreSQL test server listens and who logs in, from a test database URL.
pub(crate) struct ServerAddress {
    pub(crate) user: String,
    pub(crate) password: String,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl ServerAddress {
    pub(crate) fn parse(url: &str) -> ServerAddress {
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
