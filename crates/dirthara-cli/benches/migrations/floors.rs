//! Floors: the same work done by the database's own command-line client, timed in the same
//! run, so that dirthara's rows read as a ratio over what the server itself needs rather
//! than as absolute figures (which move with the machine, its disk and its load).
//!
//! - apply: `psql -1` (one transaction) / `mysql` (one session; MySQL DDL cannot share a
//!   transaction) running the very files dirthara applies, concatenated in version order;
//! - connect + query: a client process that connects and runs `SELECT 1`, the least any
//!   no-op run must do;
//! - peak RSS of a process, from `/usr/bin/time` (`%M`, the figure `-v` prints as
//!   "Maximum resident set size").

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{unmeasured, BenchResult, Server};

/// The client binary of `server`, found on `PATH`.
fn client(server: Server) -> BenchResult<PathBuf> {
    let name = match server {
        Server::Postgres => "psql",
        Server::Mysql => "mysql",
        Server::Mongo => return Err(unmeasured(server)),
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| format!("`{name}` is not on PATH; install the database's client"))
}

/// The parts of a `mysql://user[:password]@host[:port]/database` URL the mysql client needs.
struct MysqlTarget {
    user: String,
    password: Option<String>,
    host: String,
    port: String,
    database: String,
}

fn mysql_target(url: &str) -> BenchResult<MysqlTarget> {
    let rest = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("not a URL: {url}"))?;
    let rest = rest.split('?').next().unwrap_or(rest);
    let (auth, rest) = rest.rsplit_once('@').unwrap_or(("root", rest));
    let (user, password) = match auth.split_once(':') {
        Some((u, p)) => (u.to_string(), Some(p.to_string())),
        None => (auth.to_string(), None),
    };
    let (host_port, database) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) = host_port.split_once(':').unwrap_or((host_port, "3306"));
    Ok(MysqlTarget {
        user,
        password,
        host: host.to_string(),
        port: port.to_string(),
        database: database.to_string(),
    })
}

/// `psql URL` or `mysql -h .. database`, quiet, stopping at the first error.
fn client_command(server: Server, url: &str) -> BenchResult<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(client(server)?);
    match server {
        Server::Postgres => {
            cmd.arg(url).args(["-X", "-q", "-v", "ON_ERROR_STOP=1"]);
        }
        Server::Mysql => {
            let t = mysql_target(url)?;
            cmd.args(["--no-defaults", "-h", &t.host, "-P", &t.port, "-u", &t.user]);
            if let Some(password) = t.password {
                cmd.arg(format!("-p{password}"));
            }
            cmd.arg(&t.database);
        }
        Server::Mongo => return Err(unmeasured(server)),
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    Ok(cmd)
}

async fn timed(mut cmd: tokio::process::Command, what: &str) -> BenchResult<Duration> {
    let started = Instant::now();
    let output = cmd
        .output()
        .await
        .map_err(|e| format!("{what}: cannot start the client: {e}"))?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        return Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(elapsed)
}

/// The up files of `dir` in version order, as one script for the client; with
/// `commit_each`, each file in a transaction of its own (as a runner commits each migration).
fn script(dir: &Path, server: Server, commit_each: bool) -> BenchResult<PathBuf> {
    let mut files: Vec<(i64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            if name.contains(".down.") {
                return None;
            }
            let version = name.split('_').next()?.parse().ok()?;
            Some((version, path))
        })
        .collect();
    files.sort();
    let mut text = String::new();
    for (_, path) in files {
        if commit_each {
            text.push_str("BEGIN;\n");
        }
        text.push_str(&std::fs::read_to_string(&path).map_err(|e| e.to_string())?);
        text.push_str(";\n");
        if commit_each {
            text.push_str("COMMIT;\n");
        }
    }
    let out = std::env::temp_dir().join(format!(
        "dirthara_bench_floor_{}_{}.sql",
        std::process::id(),
        server.label()
    ));
    std::fs::write(&out, text).map_err(|e| e.to_string())?;
    Ok(out)
}

/// The client applying every file of `dir` to the empty database at `url`: PostgreSQL in one
/// transaction (`psql -1`), or with `commit_each` one transaction per file.
pub(crate) async fn apply(
    server: Server,
    url: &str,
    dir: &Path,
    commit_each: bool,
) -> BenchResult<Duration> {
    let script = script(dir, server, commit_each)?;
    let mut cmd = client_command(server, url)?;
    match server {
        Server::Postgres if commit_each => {
            cmd.arg("-f").arg(&script);
        }
        Server::Postgres => {
            cmd.arg("-1").arg("-f").arg(&script);
        }
        Server::Mysql => {
            cmd.arg("-e").arg(format!("source {}", script.display()));
        }
        Server::Mongo => return Err(unmeasured(server)),
    }
    let elapsed = timed(cmd, "the client floor (apply)").await;
    let _ = std::fs::remove_file(&script);
    elapsed
}

/// A client process that connects to `url` and runs `SELECT 1`.
pub(crate) async fn connect_and_query(server: Server, url: &str) -> BenchResult<Duration> {
    let mut cmd = client_command(server, url)?;
    match server {
        Server::Postgres => cmd.args(["-A", "-t", "-c", "SELECT 1"]),
        Server::Mysql => cmd.args(["-N", "-e", "SELECT 1"]),
        Server::Mongo => return Err(unmeasured(server)),
    };
    timed(cmd, "the client floor (connect + query)").await
}

/// Peak resident set size of `program args..` in MiB, measured by `/usr/bin/time`.
pub(crate) async fn peak_rss_mib(
    program: &Path,
    args: &[&std::ffi::OsStr],
    dir: &Path,
) -> BenchResult<f64> {
    const MARK: &str = "DIRTHARA_BENCH_MAXRSS_KIB=";
    let time = Path::new("/usr/bin/time");
    if !time.is_file() {
        return Err("/usr/bin/time is not installed (apt-get install time)".into());
    }
    let output = tokio::process::Command::from(super::support::clean_command(time))
        .arg("-f")
        .arg(format!("{MARK}%M"))
        .arg(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .map_err(|e| format!("starting /usr/bin/time: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("the measured run failed: {}", stderr.trim()));
    }
    stderr
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(MARK)?.trim().parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
        .ok_or_else(|| format!("no peak RSS in /usr/bin/time's output: {}", stderr.trim()))
}

/// In process, with the driver dirthara itself uses: connect to `url`, `SELECT 1`, close —
/// the floor for the library rows (no process start, no client of another make).
pub(crate) async fn driver_connect_and_query(server: Server, url: &str) -> BenchResult<Duration> {
    use sqlx::{Connection, Executor};
    let started = Instant::now();
    let done = async {
        match server {
            Server::Postgres => {
                let mut c = sqlx::PgConnection::connect(url).await?;
                c.execute("SELECT 1").await?;
                c.close().await
            }
            Server::Mysql => {
                let mut c = sqlx::MySqlConnection::connect(url).await?;
                c.execute("SELECT 1").await?;
                c.close().await
            }
            Server::Mongo => Err(sqlx::Error::Configuration(unmeasured(server).into())),
        }
    }
    .await;
    done.map_err(|e| format!("the driver floor (connect + query): {e}"))?;
    Ok(started.elapsed())
}
