//! A pgpool-II of the test's own, in front of one test database.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, PgConnection};

use super::pgbouncer::{free_port, ServerAddress};
use super::scratch_dir;
use super::servers::{Server, TestDb};

/// A pgpool-II of the test's own (in raw mode: one backend, no load balancing, no replication
/// or health checks) in front of the PostgreSQL test server, run in the foreground with its
/// configuration, pid file, sockets and log in a directory of its own; stopped on drop.
/// pgpool-II pools per client session (its connection cache): a client keeps one server
/// session from connect to disconnect. The binary is `DIRTHARA_TEST_PGPOOL`, else
/// `/usr/sbin/pgpool` (Debian's `pgpool2`).
pub(crate) struct PgPool {
    child: Child,
    port: u16,
    user: String,
    database: String,
    /// Holds the configuration, the pid file, the sockets and the log while pgpool runs.
    dir: tempfile::TempDir,
}

impl PgPool {
    /// A pgpool for `db` taking up to `clients` clients at once, or `None` (after saying so)
    /// when pgpool-II is not installed — a failure under `DIRTHARA_REQUIRE_SERVERS=1`.
    pub(crate) async fn start(db: &TestDb, clients: u32) -> Option<PgPool> {
        assert_eq!(
            db.server,
            Server::Postgres,
            "pgpool-II fronts PostgreSQL only"
        );
        let Some(binary) = pgpool_binary() else {
            let message = "pgpool-II is not installed (no /usr/sbin/pgpool, \
                           DIRTHARA_TEST_PGPOOL unset)";
            if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() == Ok("1") {
                panic!(
                    "{message}; DIRTHARA_REQUIRE_SERVERS=1 requires it (apt-get install pgpool2)"
                );
            }
            eprintln!("SKIPPED: {message}");
            return None;
        };
        let server = ServerAddress::parse(&db.url);
        // A port picked free a moment ago may be taken before pgpool binds it: retry.
        let mut last_log = String::new();
        for _ in 0..5 {
            let (port, pcp_port) = (free_port(), free_port());
            let dir = scratch_dir();
            write_config(dir.path(), &server, port, pcp_port, clients);
            let log = std::fs::File::create(dir.path().join("pgpool.log")).unwrap();
            let child = Command::new(&binary)
                .arg("-n")
                .arg("-f")
                .arg(dir.path().join("pgpool.conf"))
                .arg("-F")
                .arg(dir.path().join("pcp.conf"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let mut pool = PgPool {
                child,
                port,
                user: server.user.clone(),
                database: db.name.clone(),
                dir,
            };
            if pool.wait_until_serving().await {
                return Some(pool);
            }
            last_log = pool.log();
        }
        panic!("pgpool-II did not start; its log:\n{last_log}");
    }

    /// The test database, through pgpool.
    pub(crate) fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            self.user, self.port, self.database
        )
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgpool.log")).unwrap_or_default()
    }

    /// True once a query runs through pgpool; false if it exited or never answered.
    async fn wait_until_serving(&mut self) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(mut c) = PgConnection::connect(&self.url()).await {
                if c.execute("SELECT 1").await.is_ok() {
                    let _ = c.close().await;
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}

impl Drop for PgPool {
    fn drop(&mut self) {
        // SIGINT is pgpool's fast shutdown: its children close their server sessions and exit
        // with it. A SIGKILL would leave the children (and their sessions, which keep the test
        // database from being dropped) behind, so it is only the last resort.
        let _ = Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pgpool_binary() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("DIRTHARA_TEST_PGPOOL") {
        return Some(PathBuf::from(path));
    }
    Some(PathBuf::from("/usr/sbin/pgpool")).filter(|p| p.is_file())
}

fn write_config(dir: &Path, server: &ServerAddress, port: u16, pcp_port: u16, clients: u32) {
    // An empty pcp.conf: nobody may use the control port, which pgpool still opens.
    std::fs::write(dir.join("pcp.conf"), "").unwrap();
    let d = dir.display();
    // Raw mode with one backend: no streaming-replication or health checks to configure,
    // nothing load balanced, no failover. With pool_hba off pgpool relays the server's own
    // authentication (the test server trusts local logins). `num_init_children` is how many
    // clients it serves at once; more wait in its queue. `max_pool = 1`: one cached server
    // session per child.
    let conf = format!(
        "backend_clustering_mode = 'raw'\n\
         listen_addresses = '127.0.0.1'\n\
         port = {port}\n\
         socket_dir = '{d}'\n\
         pcp_listen_addresses = ''\n\
         pcp_port = {pcp_port}\n\
         pcp_socket_dir = '{d}'\n\
         backend_hostname0 = '{host}'\n\
         backend_port0 = {server_port}\n\
         backend_weight0 = 1\n\
         backend_flag0 = 'DISALLOW_TO_FAILOVER'\n\
         enable_pool_hba = off\n\
         pool_passwd = ''\n\
         num_init_children = {clients}\n\
         max_pool = 1\n\
         pid_file_name = '{d}/pgpool.pid'\n\
         logdir = '{d}'\n\
         load_balance_mode = off\n\
         sr_check_period = 0\n\
         health_check_period = 0\n\
         failover_on_backend_error = off\n\
         use_watchdog = off\n\
         log_destination = 'stderr'\n",
        host = server.host,
        server_port = server.port,
    );
    std::fs::write(dir.join("pgpool.conf"), conf).unwrap();
}
