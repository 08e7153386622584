//! An Odyssey of the test's own, in front of one test database.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, PgConnection};

use super::pgbouncer::{free_port, running_as_root, ServerAddress};
use super::servers::{Server, TestDb};

/// An Odyssey of the test's own with `pool "transaction"` or `"session"`, in front of the PostgreSQL test
/// server; stopped on drop. Odyssey needs a newer C library than the test machine's, so it runs
/// in a Debian sid chroot (`.ci/servers/sid-chroot.sh odyssey`), which shares the host's
/// network: `chroot DIR odyssey CONF`, with the configuration, pid file and log in a
/// directory of its own under the chroot's `/tmp`. The chroot is
/// `DIRTHARA_TEST_ODYSSEY_CHROOT`, else `~/.cache/dirthara-sid-chroot` when it has Odyssey.
pub(crate) struct Odyssey {
    child: Child,
    port: u16,
    user: String,
    database: String,
    /// Holds the configuration, the pid file and the log while Odyssey runs.
    dir: tempfile::TempDir,
}

impl Odyssey {
    /// An Odyssey for `db` pooling `mode` ("transaction" or "session") with up to `pool_size`
    /// server sessions, or `None` (after saying so)
    /// when there is no chroot with Odyssey or no root to enter it — a failure under
    /// `DIRTHARA_REQUIRE_SERVERS=1`.
    pub(crate) async fn start(db: &TestDb, mode: &str, pool_size: u32) -> Option<Odyssey> {
        assert_eq!(
            db.server,
            Server::Postgres,
            "Odyssey fronts PostgreSQL only"
        );
        let chroot = match odyssey_chroot() {
            Some(chroot) if running_as_root() => chroot,
            found => {
                let message = if found.is_some() {
                    "Odyssey runs in a chroot, which needs root".to_string()
                } else {
                    "no chroot with Odyssey (DIRTHARA_TEST_ODYSSEY_CHROOT unset, none in \
                     ~/.cache/dirthara-sid-chroot)"
                        .to_string()
                };
                if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() == Ok("1") {
                    panic!(
                        "{message}; DIRTHARA_REQUIRE_SERVERS=1 requires it \
                         (.ci/servers/sid-chroot.sh odyssey, as root)"
                    );
                }
                eprintln!("SKIPPED: {message}");
                return None;
            }
        };
        let server = ServerAddress::parse(&db.url);
        // A port picked free a moment ago may be taken before Odyssey binds it: retry.
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = tempfile::Builder::new()
                .prefix("dirthara-test-")
                .tempdir_in(chroot.join("tmp"))
                .expect("create a directory in the chroot's /tmp");
            // The same directory as Odyssey sees it from inside the chroot.
            let inside = Path::new("/tmp").join(dir.path().file_name().unwrap());
            write_config(dir.path(), &inside, &server, port, mode, pool_size);
            let log = std::fs::File::create(dir.path().join("odyssey.log")).unwrap();
            let child = Command::new("chroot")
                .arg(&chroot)
                .arg("odyssey")
                .arg(inside.join("odyssey.conf"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start Odyssey in {}: {e}", chroot.display()));
            let mut odyssey = Odyssey {
                child,
                port,
                user: server.user.clone(),
                database: db.name.clone(),
                dir,
            };
            if odyssey.wait_until_serving().await {
                return Some(odyssey);
            }
            last_log = odyssey.log();
        }
        panic!("Odyssey did not start; its log:\n{last_log}");
    }

    /// The test database, through Odyssey.
    pub(crate) fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            self.user, self.port, self.database
        )
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("odyssey.log")).unwrap_or_default()
    }

    /// True once a query runs through Odyssey; false if it exited or never answered.
    async fn wait_until_serving(&mut self) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(mut c) = PgConnection::connect(&self.url()).await {
                if c.execute("SELECT 1").await.is_ok() {
                    let _ = c.close().await;
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

impl Drop for Odyssey {
    fn drop(&mut self) {
        // `chroot` execs Odyssey, so this is Odyssey itself: one process, whose server
        // sessions the kernel closes with it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn odyssey_chroot() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("DIRTHARA_TEST_ODYSSEY_CHROOT") {
        return Some(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".cache/dirthara-sid-chroot"))
        .filter(|dir| dir.join("usr/bin/odyssey").is_file())
}

/// `outside` is the directory on the host, `inside` the same one seen from the chroot.
fn write_config(
    outside: &Path,
    inside: &Path,
    server: &ServerAddress,
    port: u16,
    mode: &str,
    pool_size: u32,
) {
    // Any database and user the client names, logged in to the server as themselves without a
    // password (the test server trusts local logins), pooled per `mode`. The log goes to stdout, which the test keeps in odyssey.log.
    let conf = format!(
        "daemonize no\n\
         pid_file \"{inside}/odyssey.pid\"\n\
         log_to_stdout yes\n\
         log_format \"%p %t %l [%i %s] (%c) %m\\n\"\n\
         log_session no\n\
         listen {{\n\
         \thost \"127.0.0.1\"\n\
         \tport {port}\n\
         }}\n\
         storage \"postgres_server\" {{\n\
         \ttype \"remote\"\n\
         \thost \"{host}\"\n\
         \tport {server_port}\n\
         }}\n\
         database default {{\n\
         \tuser default {{\n\
         \t\tauthentication \"none\"\n\
         \t\tstorage \"postgres_server\"\n\
         \t\tpool \"{mode}\"\n\
         \t\tpool_size {pool_size}\n\
         \t}}\n\
         }}\n",
        inside = inside.display(),
        host = server.host,
        server_port = server.port,
    );
    std::fs::write(outside.join("odyssey.conf"), conf).unwrap();
}
