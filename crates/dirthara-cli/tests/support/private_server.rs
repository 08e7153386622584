//! Database servers of a test's own: a PostgreSQL cluster made with `initdb`, or a MariaDB
//! made with `mariadb-install-db` (an Oracle MySQL made with `mysqld --initialize-insecure`
//! inside a chroot, when `DIRTHARA_TEST_MYSQL_CHROOT` names one), in a temporary directory, on
//! a free port of 127.0.0.1. A
//! test that stops or restarts a server uses one of these, never the machine's servers, so
//! `cargo test` neither disturbs other work on the machine nor is disturbed by it: nothing
//! here looks for processes by name, and every signal goes to the pid this module started.
//!
//! The server runs as a child of the test process (as the `postgres` or `mysql` user when
//! the test runs as root: initdb and postgres refuse root), and [`PrivateServer`] stops it
//! and removes its directory on drop, which also runs when the test panics. A test process
//! killed outright cannot run its drops: the next [`PrivateServer::start`] anywhere on the
//! machine finds such an instance by its `owner` file (the pid and start time of the process
//! that made it, now gone) and stops it, checking first that the pid it signals is a server
//! started on that very directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, MySqlConnection, PgConnection};

use super::servers::Server;

mod orphans;
use orphans::{owner_token, reap_orphans};

/// The directory prefix of every private instance, under the system temporary directory.
const PREFIX: &str = "dirthara-private-";

/// A private server, stopped and removed on drop.
pub(crate) struct PrivateServer {
    server: Server,
    /// The instance's own directory: the data directory, socket, log and `owner` file.
    root: PathBuf,
    port: u16,
    child: Option<Child>,
    binaries: Binaries,
    /// Settings beyond the usual ones: `name=value` (PostgreSQL `-c`, MariaDB `--name=value`).
    settings: Vec<String>,
}

/// Where the server's programs are.
#[derive(Clone)]
enum Binaries {
    /// PostgreSQL: the directory holding `initdb` and `postgres`.
    Postgres(PathBuf),
    /// MariaDB: `mariadb-install-db` and `mariadbd`.
    Mariadb {
        install_db: PathBuf,
        server: PathBuf,
    },
    /// Oracle MySQL: the `mysqld` of a chroot (Debian sid's needs sid's C library; `.ci/run`
    /// prepares it). The instance's directory lives under the chroot's `/tmp`, the only part
    /// of the file system the server sees.
    OracleMysqlChroot(PathBuf),
}

impl PrivateServer {
    /// A running private server, or `None` (after saying why) when this machine cannot make
    /// one: a failure instead under `DIRTHARA_REQUIRE_SERVERS=1`.
    pub(crate) fn start_or_skip(server: Server) -> Option<PrivateServer> {
        PrivateServer::start_with_or_skip(server, &[])
    }

    /// Makes a new instance in a temporary directory and starts it.
    pub(crate) fn start(server: Server) -> Result<PrivateServer, String> {
        PrivateServer::start_with(server, &[])
    }

    /// [`PrivateServer::start_or_skip`] with `settings` (`name=value`) on the server's command
    /// line: what a test needs of a server that the machine's servers must not be made to do
    /// (log every statement, collect performance_schema).
    pub(crate) fn start_with_or_skip(server: Server, settings: &[&str]) -> Option<PrivateServer> {
        match PrivateServer::start_with(server, settings) {
            Ok(instance) => Some(instance),
            Err(message) => {
                if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() == Ok("1") {
                    panic!("{message}; DIRTHARA_REQUIRE_SERVERS=1 requires it");
                }
                eprintln!("SKIPPED: {message}");
                None
            }
        }
    }

    /// [`PrivateServer::start`] with `settings` (`name=value`) on the server's command line.
    pub(crate) fn start_with(server: Server, settings: &[&str]) -> Result<PrivateServer, String> {
        reap_orphans();
        let binaries = Binaries::find(server)?;
        let temp_dir = match &binaries {
            Binaries::OracleMysqlChroot(chroot) => chroot.join("tmp"),
            _ => std::env::temp_dir(),
        };
        let root = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", server.name()))
            .tempdir_in(temp_dir)
            .map_err(|e| format!("cannot create a private {} directory: {e}", server.name()))?
            .keep();
        fs::write(
            root.join("owner"),
            owner_token(std::process::id()).unwrap_or_default(),
        )
        .map_err(|e| format!("cannot write {}: {e}", root.join("owner").display()))?;
        let mut instance = PrivateServer {
            server,
            root,
            port: 0,
            child: None,
            binaries,
            settings: settings.iter().map(|s| s.to_string()).collect(),
        };
        instance.initialise()?;
        // A port found free a moment ago may be taken before the server binds it: retry.
        let mut last = String::new();
        for _ in 0..5 {
            instance.port = free_port();
            match instance.launch() {
                Ok(()) => return Ok(instance),
                Err(message) => last = message,
            }
        }
        Err(last)
    }

    pub(crate) fn server(&self) -> Server {
        self.server
    }

    /// The instance's directory (data, socket, log), removed on drop.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The server process's id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The administrative URL, for [`TestDb::create_at`](super::servers::TestDb::create_at).
    pub(crate) fn admin_url(&self) -> String {
        match self.server {
            Server::Postgres => format!("postgres://postgres@127.0.0.1:{}/postgres", self.port),
            Server::Mysql => format!("mysql://root@127.0.0.1:{}/mysql", self.port),
            Server::Mongo => unreachable!("no private MongoDB"),
        }
    }

    /// Stops the server cleanly (PostgreSQL's fast shutdown, MariaDB's normal one) and starts
    /// it again on the same data directory and port; returns once it answers queries.
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let mut last = String::new();
        // The port was ours a moment ago; should something else grab it, wait for it.
        for _ in 0..5 {
            match self.launch() {
                Ok(()) => return Ok(()),
                Err(message) => last = message,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err(last)
    }

    /// Stops the server and waits until its process has exited. Clean shutdown first; a
    /// server still running after 30 s is killed.
    pub(crate) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let clean = match self.server {
            Server::Postgres => "-INT",
            _ => "-TERM",
        };
        signal(child.id(), clean);
        let started = Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = fs::remove_file(self.root.join("server.pid"));
    }

    /// The server's log so far, for failure messages.
    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.root.join("server.log")).unwrap_or_default()
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// `path` (under [`PrivateServer::root`]) as the server sees it: inside a chroot, the
    /// part after the chroot's directory.
    fn seen_by_server(&self, path: &Path) -> PathBuf {
        match &self.binaries {
            Binaries::OracleMysqlChroot(chroot) => {
                Path::new("/").join(path.strip_prefix(chroot).unwrap_or(path))
            }
            _ => path.to_path_buf(),
        }
    }

    /// The command line of a MariaDB or MySQL server on `port`, its paths as it sees them;
    /// the server drops to its user itself.
    fn mysqld_args(&self, port: &str) -> Vec<String> {
        let path = |name: &str| {
            self.seen_by_server(&self.root.join(name))
                .display()
                .to_string()
        };
        let mut args = vec![
            "--no-defaults".to_string(),
            format!("--datadir={}", path("data")),
            format!("--socket={}", path("mysqld.sock")),
            format!("--pid-file={}", path("mysqld.pid")),
            format!("--port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--skip-name-resolve".into(),
            "--skip-log-bin".into(),
            "--innodb-buffer-pool-size=64M".into(),
            "--max-connections=300".into(),
        ];
        args.extend(self.settings.iter().map(|s| format!("--{s}")));
        args.extend(
            self.service_user()
                .map(|user| format!("--user={}", user.name)),
        );
        args
    }

    /// The system user the server runs as (see [`service_user`]); a chrooted server's own,
    /// from the chroot's user database.
    fn service_user(&self) -> Option<ServiceUser> {
        match &self.binaries {
            Binaries::OracleMysqlChroot(chroot) => service_user_in(Some(chroot), "mysql"),
            _ => service_user(self.server),
        }
    }

    /// `initdb` / `mariadb-install-db`, as the server's user.
    fn initialise(&self) -> Result<(), String> {
        let user = self.service_user();
        if let Some(user) = &user {
            chown(&self.root, user)?;
        }
        let mut cmd = match &self.binaries {
            Binaries::Postgres(bin) => {
                let mut cmd = as_user(user.as_ref(), &bin.join("initdb"));
                cmd.arg("-D")
                    .arg(self.data_dir())
                    .args(["--auth=trust", "-U", "postgres", "--encoding=UTF8"])
                    // A test cluster outlives no crash of the machine: no need to wait for
                    // the disk.
                    .arg("--no-sync");
                cmd
            }
            Binaries::Mariadb { install_db, .. } => {
                let mut cmd = Command::new(install_db);
                cmd.arg("--no-defaults")
                    .arg(format!("--datadir={}", self.data_dir().display()))
                    // root without a password, from 127.0.0.1 too: the URL the tests use.
                    .args([
                        "--auth-root-authentication-method=normal",
                        "--skip-test-db",
                        "--skip-name-resolve",
                    ]);
                if let Some(user) = &user {
                    cmd.arg(format!("--user={}", user.name));
                }
                cmd
            }
            Binaries::OracleMysqlChroot(chroot) => {
                let Some(user) = &user else {
                    return Err(format!(
                        "a private Oracle MySQL in the chroot {} needs root (chroot) and a \
                         `mysql` user inside it",
                        chroot.display()
                    ));
                };
                // The tests connect to 127.0.0.1 over TCP as root without a password, as on
                // MariaDB; with --skip-name-resolve, root@localhost matches the socket only.
                fs::write(
                    self.root.join("init.sql"),
                    "CREATE USER IF NOT EXISTS 'root'@'%';\n\
                     GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;\n",
                )
                .map_err(|e| format!("cannot write init.sql: {e}"))?;
                let mut cmd = Command::new("chroot");
                cmd.arg(chroot)
                    .args(["mysqld", "--no-defaults", "--initialize-insecure"])
                    .arg(format!("--user={}", user.name))
                    .arg(format!(
                        "--datadir={}",
                        self.seen_by_server(&self.data_dir()).display()
                    ));
                cmd
            }
        };
        let log = self.root.join("init.log");
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
        let _ = fs::write(
            &log,
            [out.stdout.as_slice(), out.stderr.as_slice()].concat(),
        );
        if !out.status.success() {
            return Err(format!(
                "{cmd:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Starts the server process on `self.port` and waits until it answers a query.
    fn launch(&mut self) -> Result<(), String> {
        let user = self.service_user();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("server.log"))
            .map_err(|e| format!("cannot open the server log: {e}"))?;
        let port = self.port.to_string();
        let mut cmd = match &self.binaries {
            Binaries::Postgres(bin) => {
                let mut cmd = as_user(user.as_ref(), &bin.join("postgres"));
                cmd.arg("-D").arg(self.data_dir());
                for setting in [
                    format!("port={port}"),
                    "listen_addresses=127.0.0.1".into(),
                    format!("unix_socket_directories={}", self.root.display()),
                    "max_connections=200".into(),
                    "shared_buffers=32MB".into(),
                    // Only clean shutdowns happen to this cluster, and the machine does not
                    // crash under a test: flushing to the disk would only slow the chaos down.
                    "fsync=off".into(),
                ]
                .into_iter()
                .chain(self.settings.iter().cloned())
                {
                    cmd.arg("-c").arg(setting);
                }
                cmd
            }
            Binaries::Mariadb { server, .. } => {
                let mut cmd = Command::new(server);
                cmd.args(self.mysqld_args(&port));
                cmd
            }
            Binaries::OracleMysqlChroot(chroot) => {
                // chroot executes mysqld in place: the child's pid is the server's own.
                let mut cmd = Command::new("chroot");
                cmd.arg(chroot)
                    .arg("mysqld")
                    .args(self.mysqld_args(&port))
                    .args([
                        format!(
                            "--init-file={}",
                            self.seen_by_server(&self.root.join("init.sql")).display()
                        ),
                        "--mysqlx=OFF".into(),
                        "--secure-file-priv=".into(),
                    ]);
                cmd
            }
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
        // What the reaper signals should this process die without dropping us.
        let _ = fs::write(self.root.join("server.pid"), child.id().to_string());
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "the private {} server exited ({status}) on port {}; its log:\n{}",
                    self.server.name(),
                    self.port,
                    self.log()
                ));
            }
            if answers(self.server, &self.admin_url()) {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(60) {
                self.stop();
                return Err(format!(
                    "the private {} server did not answer within 60 s; its log:\n{}",
                    self.server.name(),
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.root);
    }
}

impl Binaries {
    /// PostgreSQL: `DIRTHARA_TEST_POSTGRES_BIN`, else the newest `/usr/lib/postgresql/*/bin`,
    /// else `initdb` on the PATH. MySQL: Oracle MySQL in the chroot that
    /// `DIRTHARA_TEST_MYSQL_CHROOT` names, else MariaDB from `DIRTHARA_TEST_MARIADB_BIN` (a
    /// directory holding both programs), else the PATH, `/usr/bin` and `/usr/sbin`.
    fn find(server: Server) -> Result<Binaries, String> {
        match server {
            Server::Postgres => {
                if let Ok(dir) = std::env::var("DIRTHARA_TEST_POSTGRES_BIN") {
                    return Ok(Binaries::Postgres(PathBuf::from(dir)));
                }
                let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| {
                        let major = e.file_name().to_str()?.parse().ok()?;
                        Some((major, e.path().join("bin")))
                    })
                    .filter(|(_, bin)| bin.join("initdb").is_file())
                    .collect();
                versions.sort();
                if let Some((_, bin)) = versions.pop() {
                    return Ok(Binaries::Postgres(bin));
                }
                find_program("initdb", None)
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                    .map(Binaries::Postgres)
                    .ok_or_else(|| {
                        "no PostgreSQL server programs (initdb) in /usr/lib/postgresql/*/bin or \
                         on the PATH, and DIRTHARA_TEST_POSTGRES_BIN unset: a private PostgreSQL \
                         cannot be made"
                            .to_string()
                    })
            }
            Server::Mysql => {
                if let Ok(chroot) = std::env::var("DIRTHARA_TEST_MYSQL_CHROOT") {
                    let chroot = PathBuf::from(chroot);
                    if !chroot.join("usr/sbin/mysqld").is_file() {
                        return Err(format!(
                            "DIRTHARA_TEST_MYSQL_CHROOT={} holds no usr/sbin/mysqld: \
                             .ci/servers/sid-chroot.sh mysql-server-core makes one",
                            chroot.display()
                        ));
                    }
                    return Ok(Binaries::OracleMysqlChroot(chroot));
                }
                let dir = std::env::var("DIRTHARA_TEST_MARIADB_BIN")
                    .ok()
                    .map(PathBuf::from);
                let install_db = find_program("mariadb-install-db", dir.as_deref());
                let server = find_program("mariadbd", dir.as_deref());
                match (install_db, server) {
                    (Some(install_db), Some(server)) => {
                        Ok(Binaries::Mariadb { install_db, server })
                    }
                    _ => Err(
                        "no mariadb-install-db and mariadbd on the PATH, /usr/bin or \
                              /usr/sbin, and DIRTHARA_TEST_MARIADB_BIN unset: a private MariaDB \
                              cannot be made"
                            .into(),
                    ),
                }
            }
            Server::Mongo => Err("there is no private MongoDB".into()),
        }
    }
}

fn find_program(name: &str, dir: Option<&Path>) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = dir.into_iter().map(Path::to_path_buf).collect();
    if dir.is_none() {
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        dirs.extend(["/usr/bin".into(), "/usr/sbin".into()]);
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// The system user a server must run as: root may not run PostgreSQL, and MariaDB's files
/// should not belong to root. `None` when the test is not root: it then runs as itself.
struct ServiceUser {
    name: String,
    uid: u32,
    gid: u32,
}

fn service_user(server: Server) -> Option<ServiceUser> {
    let name = match server {
        Server::Postgres => "postgres",
        _ => "mysql",
    };
    service_user_in(None, name)
}

/// `name`'s ids, from the user database of `chroot` (the machine's when `None`), when the
/// test runs as root.
fn service_user_in(chroot: Option<&Path>, name: &str) -> Option<ServiceUser> {
    if id(None, &["-u"], None) != Some(0) {
        return None;
    }
    Some(ServiceUser {
        name: name.to_string(),
        uid: id(chroot, &["-u"], Some(name))?,
        gid: id(chroot, &["-g"], Some(name))?,
    })
}

fn id(chroot: Option<&Path>, flags: &[&str], user: Option<&str>) -> Option<u32> {
    let mut cmd = match chroot {
        Some(dir) => {
            let mut cmd = Command::new("chroot");
            cmd.arg(dir).arg("id");
            cmd
        }
        None => Command::new("id"),
    };
    let out = cmd.args(flags).args(user).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn chown(dir: &Path, user: &ServiceUser) -> Result<(), String> {
    std::os::unix::fs::chown(dir, Some(user.uid), Some(user.gid))
        .map_err(|e| format!("cannot give {} to user {}: {e}", dir.display(), user.name))
}

/// `program` run as `user` (setpriv executes it in place, so the child's pid is the
/// program's own and a signal to it reaches the server, not a wrapper).
fn as_user(user: Option<&ServiceUser>, program: &Path) -> Command {
    match user {
        None => Command::new(program),
        Some(user) => {
            let mut cmd = Command::new("setpriv");
            cmd.arg(format!("--reuid={}", user.uid))
                .arg(format!("--regid={}", user.gid))
                .arg("--init-groups")
                .arg("--")
                .arg(program);
            cmd
        }
    }
}

fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Whether the server at `url` answers a query. Runs on a thread of its own with its own
/// runtime, so that it may be called from inside async code too.
fn answers(server: Server, url: &str) -> bool {
    let url = url.to_string();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return false;
        };
        rt.block_on(async {
            let probe = async {
                match server {
                    Server::Postgres => {
                        PgConnection::connect(&url)
                            .await?
                            .execute("SELECT 1")
                            .await?;
                    }
                    _ => {
                        MySqlConnection::connect(&url)
                            .await?
                            .execute("SELECT 1")
                            .await?;
                    }
                }
                Ok::<_, sqlx::Error>(())
            };
            matches!(
                tokio::time::timeout(Duration::from_secs(5), probe).await,
                Ok(Ok(()))
            )
        })
    })
    .join()
    .unwrap_or(false)
}
