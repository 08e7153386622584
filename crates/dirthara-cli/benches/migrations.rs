//! Migration-runner benchmarks against the local servers (no criterion: `harness = false`,
//! timed with `std::time::Instant`). Long because it is a list of scenarios, each short, that
//! share the runner and the floors; `benches/migrations/floors.rs` holds the floors.
//!
//! ```text
//! cargo build --release -p dirthara-cli          # for the CLI rows (or bash bench/run.sh)
//! cargo bench -p dirthara-cli --bench migrations
//! ```
//!
//! - a. applying 1,000 trivial pending migrations (each with a down file, as in most real
//!   projects; only the up files are sent): PostgreSQL and MariaDB (session lock),
//!   SQLite (no lock), each server beside its floor: its own client applying the same files;
//! - b. `migrate` with 1,000 applied and nothing pending, in-process and as a CLI process,
//!   beside the floor of a client process that connects and runs one query, with peak RSS;
//! - c. 8 CLI processes started at once on one empty database with 200 pending, beside one
//!   runner alone, on PostgreSQL and MariaDB;
//! - d. lock hand-over latency (B's `lock_acquired.at` − A's `lock_released.at`, the events'
//!   own stamps), PostgreSQL (by TCP, and by its socket, where the lock takes the check that
//!   no pooler stands in between) and MariaDB;
//! - e. the no-op as the history grows: 1 applied against 1,000 applied, CLI, both servers;
//! - f. round trips per migration, counted on the wire by a proxy, both servers.
//!
//! Compare rows of one run with each other (ratios), not with figures from another machine.
//! `DIRTHARA_BENCH_ONLY=pg,handover-mysql` runs only the scenarios named (see `wanted`).
//!
//! Every server database is created under a unique name and dropped at the end (also when a
//! scenario fails). A server that cannot be reached skips its rows with a message. The
//! servers, their throwaway databases, the migration directories and the clean environment of
//! every CLI process are the test suite's (`tests/support`): `DIRTHARA_TEST_POSTGRES_URL` /
//! `DIRTHARA_TEST_MYSQL_URL`, by default the local trust-auth ones. The CLI binary is
//! `target/release/dirthara` (override: `DIRTHARA_BENCH_BIN`); without it the CLI rows are
//! skipped.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use dirthara::{Config, EventKind, EventSink, Locking, Migrator, RunReport};
use sqlx::{Connection, MySqlConnection, PgConnection};

#[path = "migrations/floors.rs"]
mod floors;
#[path = "migrations/round_trips.rs"]
mod round_trips;
#[path = "migrations/scaling.rs"]
mod scaling;
#[path = "../tests/support/mod.rs"]
mod support;

use support::servers::{Server, TestDb};
use support::{clean_command, dirthara_with, scratch_dir, try_applied_versions, Migrations};

type BenchResult<T> = Result<T, String>;

/// Trivial migrations applied in (a) and found applied in (b).
const TRIVIAL: i64 = 1000;
/// Pending migrations the concurrent runners of (c) race for.
const CONTENDED: i64 = 200;
const RUNNERS: usize = 8;
const APPLY_REPS: usize = 3;
const NOOP_REPS: usize = 5;
const CONTENTION_REPS: usize = 3;
const HANDOVER_REPS: usize = 20;
/// How long runner A of (d) holds the lock with its migration.
const HOLD_SECONDS: f64 = 0.3;

// ---------------------------------------------------------------------------------------
// Servers and throwaway databases
// ---------------------------------------------------------------------------------------

/// The bench measures the servers with a command-line client to make its floors with:
/// PostgreSQL and MariaDB, not MongoDB.
fn unmeasured(server: Server) -> String {
    format!("the bench does not measure {}", server.label())
}

/// PostgreSQL's committed-transaction counter for one database, read from the admin
/// connection (so the reads themselves are not counted). Every statement outside an
/// explicit transaction commits one, so the delta approximates the runner's round trips.
struct XactCounter {
    admin: PgConnection,
}

impl XactCounter {
    async fn connect() -> BenchResult<XactCounter> {
        let admin = PgConnection::connect(&Server::Postgres.admin_url())
            .await
            .map_err(|e| format!("PostgreSQL admin connection: {e}"))?;
        Ok(XactCounter { admin })
    }

    /// Waits until no client session is left on `db` (a backend flushes its statistics as it
    /// exits), then reads `xact_commit`.
    async fn read(&mut self, db: &str) -> BenchResult<i64> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let sessions: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = $1 AND backend_type = 'client backend'",
            )
            .bind(db)
            .fetch_one(&mut self.admin)
            .await
            .map_err(|e| e.to_string())?;
            if sessions == 0 || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
            .bind(db)
            .fetch_one(&mut self.admin)
            .await
            .map_err(|e| e.to_string())
    }

    async fn text(&mut self, sql: &str) -> String {
        sqlx::query_scalar::<_, String>(sql)
            .fetch_one(&mut self.admin)
            .await
            .unwrap_or_else(|e| format!("? ({e})"))
    }
}

async fn count_history(server: Server, url: &str) -> BenchResult<i64> {
    let sql = "SELECT count(*) FROM dirthara_migrations";
    let counted = match server {
        Server::Postgres => {
            let mut c = PgConnection::connect(url)
                .await
                .map_err(|e| e.to_string())?;
            let n = sqlx::query_scalar(sql).fetch_one(&mut c).await;
            let _ = c.close().await;
            n
        }
        Server::Mysql => {
            let mut c = MySqlConnection::connect(url)
                .await
                .map_err(|e| e.to_string())?;
            let n = sqlx::query_scalar(sql).fetch_one(&mut c).await;
            let _ = c.close().await;
            n
        }
        Server::Mongo => return Err(unmeasured(server)),
    };
    counted.map_err(|e| format!("counting history rows: {e}"))
}

// ---------------------------------------------------------------------------------------
// Migrations on disk, runners in-process and as processes
// ---------------------------------------------------------------------------------------

/// A directory of `count` trivial migrations, `CREATE TABLE tN (id INT)`, up only: the floors
/// run every file of the directory.
/// `count` migrations of one table each; with `downs`, each with its down file, as in most
/// real projects (what a no-op must not read).
fn trivial_migrations(count: i64, downs: bool) -> Migrations {
    let m = Migrations::new();
    for v in 1..=count {
        let down = format!("DROP TABLE t{v}");
        m.add(
            v,
            &format!("t{v}"),
            &format!("CREATE TABLE t{v} (id INT)"),
            downs.then_some(down.as_str()),
        );
    }
    m
}

fn config(url: &str, dir: &Path, locking: Locking) -> Config {
    let mut config = Config::with_url(url);
    config.directories = vec![dir.to_path_buf()];
    config.locking = locking;
    config
}

struct LibraryRun {
    elapsed: Duration,
    report: RunReport,
    /// Sum of the `MigrationFinished` durations: time inside the steps themselves.
    step_time: Duration,
}

async fn run_library(url: &str, dir: &Path, locking: Locking) -> BenchResult<LibraryRun> {
    let steps = Arc::new(Mutex::new(Duration::ZERO));
    let sink_steps = Arc::clone(&steps);
    let events = EventSink::new(move |event| {
        if let EventKind::MigrationFinished { duration, .. } = &event.kind {
            *sink_steps.lock().unwrap() += *duration;
        }
    });
    let migrator = Migrator::new(config(url, dir, locking)).with_events(events);
    let started = Instant::now();
    let report = migrator
        .migrate()
        .await
        .map_err(|e| format!("migrate failed: {e}"))?;
    let elapsed = started.elapsed();
    let step_time = *steps.lock().unwrap();
    Ok(LibraryRun {
        elapsed,
        report,
        step_time,
    })
}

/// The release CLI, if it was built.
fn cli_binary() -> BenchResult<PathBuf> {
    let path = match std::env::var_os("DIRTHARA_BENCH_BIN") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/dirthara"),
    };
    if path.is_file() {
        Ok(path.canonicalize().unwrap_or(path))
    } else {
        Err(format!(
            "no CLI binary at {} (run `cargo build --release -p dirthara-cli` or bench/run.sh)",
            path.display()
        ))
    }
}

/// `dirthara -d URL --dir DIR <args>` with a clean environment, run from the migrations
/// directory so no stray `dirthara.toml` is picked up.
fn cli(bin: &Path, url: &str, dir: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::from(dirthara_with(bin, url, dir, args));
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

fn describe(output: &Output) -> String {
    format!(
        "exit {:?}; stdout: {}; stderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).trim(),
        String::from_utf8_lossy(&output.stderr).trim()
    )
}

async fn run_cli(mut cmd: tokio::process::Command) -> BenchResult<(Duration, Output)> {
    let started = Instant::now();
    let output = cmd
        .output()
        .await
        .map_err(|e| format!("starting the CLI: {e}"))?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        return Err(format!("CLI run failed: {}", describe(&output)));
    }
    Ok((elapsed, output))
}

// ---------------------------------------------------------------------------------------
// Statistics and the results table
// ---------------------------------------------------------------------------------------

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Summary {
    n: usize,
    median: f64,
    min: f64,
    max: f64,
    p90: f64,
}

fn summarize(samples: &[f64]) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    assert!(n > 0, "no samples");
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    // Nearest rank.
    let p90 = sorted[((n as f64 * 0.9).ceil() as usize).clamp(1, n) - 1];
    Summary {
        n,
        median,
        min: sorted[0],
        max: sorted[n - 1],
        p90,
    }
}

fn median(samples: &[f64]) -> f64 {
    summarize(samples).median
}

fn fmt_ms(value: f64) -> String {
    if value.abs() < 10.0 {
        format!("{value:.3}")
    } else if value.abs() < 1000.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

struct Row {
    label: String,
    /// `None`: skipped or failed, the reason in `notes`.
    stats: Option<Summary>,
    notes: Vec<String>,
}

#[derive(Default)]
struct Table {
    rows: Vec<Row>,
}

impl Table {
    fn add(&mut self, label: impl Into<String>, samples: &[f64], notes: Vec<String>) {
        let row = Row {
            label: label.into(),
            stats: Some(summarize(samples)),
            notes,
        };
        eprintln!("  {}", render_row(&row));
        self.rows.push(row);
    }

    fn skip(&mut self, label: impl Into<String>, reason: impl Into<String>) {
        let row = Row {
            label: label.into(),
            stats: None,
            notes: vec![reason.into()],
        };
        eprintln!("  {}", render_row(&row));
        self.rows.push(row);
    }

    fn print(&self) {
        println!(
            "{:<62} {:>3} {:>9} {:>9} {:>9} {:>9}",
            "scenario (times in ms)", "n", "median", "min", "max", "p90"
        );
        println!("{}", "-".repeat(62 + 4 + 4 * 10));
        for row in &self.rows {
            println!("{}", render_row(row));
            for note in row.notes.iter().skip(usize::from(row.stats.is_none())) {
                println!("{:6}-> {note}", "");
            }
        }
    }
}

fn render_row(row: &Row) -> String {
    match &row.stats {
        Some(s) => format!(
            "{:<62} {:>3} {:>9} {:>9} {:>9} {:>9}",
            row.label,
            s.n,
            fmt_ms(s.median),
            fmt_ms(s.min),
            fmt_ms(s.max),
            // A 90th percentile of three samples is just the maximum.
            if s.n >= 10 {
                fmt_ms(s.p90)
            } else {
                "-".to_string()
            }
        ),
        None => format!("{:<62} SKIPPED: {}", row.label, row.notes[0]),
    }
}

// ---------------------------------------------------------------------------------------
// a + b: many trivial pending migrations, then a no-op run over them
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Postgres,
    Mysql,
    Sqlite,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Postgres => "PostgreSQL session lock",
            Kind::Mysql => "MariaDB session lock",
            Kind::Sqlite => "SQLite --no-lock",
        }
    }

    fn locking(self) -> Locking {
        match self {
            Kind::Postgres | Kind::Mysql => Locking::Auto,
            Kind::Sqlite => Locking::Off,
        }
    }

    fn cli_flags(self) -> &'static [&'static str] {
        match self {
            Kind::Postgres | Kind::Mysql => &[],
            Kind::Sqlite => &["--no-lock"],
        }
    }

    /// The server whose own client makes this kind's floor.
    fn server(self) -> Option<Server> {
        match self {
            Kind::Postgres => Some(Server::Postgres),
            Kind::Mysql => Some(Server::Mysql),
            Kind::Sqlite => None,
        }
    }
}

/// A fresh, empty database of `kind`.
struct FreshDb {
    url: String,
    server: Option<TestDb>,
    _file: Option<tempfile::TempDir>,
}

impl FreshDb {
    async fn create(kind: Kind) -> BenchResult<FreshDb> {
        match kind {
            Kind::Postgres | Kind::Mysql => {
                let server = kind.server().expect("a server kind");
                let db = TestDb::try_create(server).await?;
                Ok(FreshDb {
                    url: db.url.clone(),
                    server: Some(db),
                    _file: None,
                })
            }
            Kind::Sqlite => {
                let dir = scratch_dir();
                Ok(FreshDb {
                    url: format!("sqlite:{}", dir.path().join("bench.db").display()),
                    server: None,
                    _file: Some(dir),
                })
            }
        }
    }

    fn name(&self) -> Option<&str> {
        self.server.as_ref().map(|db| db.name.as_str())
    }
}

/// Reads the transaction counter when there is one (PostgreSQL).
async fn xact(counter: &mut Option<XactCounter>, db: &FreshDb) -> BenchResult<Option<i64>> {
    match (counter.as_mut(), db.name()) {
        (Some(counter), Some(name)) => counter.read(name).await.map(Some),
        _ => Ok(None),
    }
}

fn xact_note(deltas: &[f64], per: f64) -> Vec<String> {
    if deltas.is_empty() {
        return Vec::new();
    }
    let m = median(deltas);
    let mut note =
        format!("pg_stat_database.xact_commit delta (~ server round trips): median {m:.0}");
    if per > 1.0 {
        note.push_str(&format!(" = {:.2} per migration", m / per));
    }
    vec![note]
}

async fn bench_apply_and_noop(
    kind: Kind,
    bin: &BenchResult<PathBuf>,
    table: &mut Table,
) -> BenchResult<()> {
    let migrations = trivial_migrations(TRIVIAL, true);
    let dir = migrations.path();
    let mut counter = match kind {
        Kind::Postgres => Some(XactCounter::connect().await?),
        Kind::Mysql | Kind::Sqlite => None,
    };

    // a. 1,000 pending on a fresh database.
    let (mut totals, mut per, mut outside, mut deltas) = (vec![], vec![], vec![], vec![]);
    let mut last = None;
    for rep in 1..=APPLY_REPS {
        eprintln!(
            "[a] {}: apply {TRIVIAL} pending, rep {rep}/{APPLY_REPS}",
            kind.label()
        );
        let db = FreshDb::create(kind).await?;
        let before = xact(&mut counter, &db).await?;
        let run = run_library(&db.url, dir, kind.locking()).await?;
        let after = xact(&mut counter, &db).await?;
        if run.report.applied.len() != TRIVIAL as usize {
            return Err(format!(
                "applied {} of {TRIVIAL} migrations",
                run.report.applied.len()
            ));
        }
        totals.push(ms(run.elapsed));
        per.push(ms(run.elapsed) / TRIVIAL as f64);
        outside.push(ms(run.elapsed.saturating_sub(run.step_time)) / TRIVIAL as f64);
        if let (Some(b), Some(a)) = (before, after) {
            deltas.push((a - b) as f64);
        }
        last = Some(db);
    }
    let step_share = 100.0 * (1.0 - median(&outside) / median(&per));
    let mut notes = vec![format!(
        "steps themselves (MigrationFinished durations) are {step_share:.0}% of it; the rest \
         ({} ms per migration) is lock re-checks, load, connect and history reads",
        fmt_ms(median(&outside))
    )];
    notes.extend(xact_note(&deltas, TRIVIAL as f64));
    table.add(
        format!("a. apply {TRIVIAL} pending, {}: total", kind.label()),
        &totals,
        notes,
    );
    table.add(
        format!(
            "a. apply {TRIVIAL} pending, {}: per migration",
            kind.label()
        ),
        &per,
        vec![],
    );
    if let Some(server) = kind.server() {
        let label = format!(
            "a. floor: {} applying the same {TRIVIAL}, per migration",
            floor_client(server)
        );
        let result = apply_floor(server, dir, median(&per), false).await;
        match result {
            Ok((samples, note)) => table.add(label, &samples, vec![note]),
            Err(reason) => table.skip(label, reason),
        }
    }
    if kind == Kind::Postgres {
        // A runner commits each migration (a WAL flush each); `psql -1` commits once.
        let label = format!("a. floor: psql, one transaction per file, {TRIVIAL}, per migration");
        let result = apply_floor(Server::Postgres, dir, median(&per), true).await;
        match result {
            Ok((samples, note)) => table.add(label, &samples, vec![note]),
            Err(reason) => table.skip(label, reason),
        }
    }

    // b. the same database again: everything applied, nothing to do.
    let db = last.expect("at least one repetition");
    let (mut times, mut deltas) = (vec![], vec![]);
    for rep in 1..=NOOP_REPS {
        eprintln!(
            "[b] {}: no-op migrate (library), rep {rep}/{NOOP_REPS}",
            kind.label()
        );
        let before = xact(&mut counter, &db).await?;
        let run = run_library(&db.url, dir, kind.locking()).await?;
        let after = xact(&mut counter, &db).await?;
        if !run.report.applied.is_empty() {
            return Err(format!(
                "the no-op run applied {} migrations",
                run.report.applied.len()
            ));
        }
        times.push(ms(run.elapsed));
        if let (Some(b), Some(a)) = (before, after) {
            deltas.push((a - b) as f64);
        }
    }
    let library_median = median(&times);
    table.add(
        format!("b. no-op, {TRIVIAL} applied, {}: library", kind.label()),
        &times,
        xact_note(&deltas, 0.0),
    );
    if let Some(server) = kind.server() {
        let label = "b. floor: in-process driver (sqlx) connect + SELECT 1 + close";
        let mut floor = vec![];
        for _ in 0..NOOP_REPS {
            floor.push(ms(floors::driver_connect_and_query(server, &db.url).await?));
        }
        let ratio = library_median / median(&floor);
        table.add(
            label,
            &floor,
            vec![format!("the library no-op above is {ratio:.2}x this floor")],
        );
    }

    let label = format!("b. no-op, {TRIVIAL} applied, {}: CLI process", kind.label());
    match bin {
        Err(reason) => table.skip(label, reason.clone()),
        Ok(bin) => {
            let (mut times, mut deltas) = (vec![], vec![]);
            let mut args = kind.cli_flags().to_vec();
            args.extend(["-q", "migrate"]);
            for rep in 1..=NOOP_REPS {
                eprintln!(
                    "[b] {}: no-op migrate (CLI), rep {rep}/{NOOP_REPS}",
                    kind.label()
                );
                let before = xact(&mut counter, &db).await?;
                let (elapsed, _) = run_cli(cli(bin, &db.url, dir, &args)).await?;
                let after = xact(&mut counter, &db).await?;
                times.push(ms(elapsed));
                if let (Some(b), Some(a)) = (before, after) {
                    deltas.push((a - b) as f64);
                }
            }
            let mut notes = xact_note(&deltas, 0.0);
            let mut rss_args: Vec<&std::ffi::OsStr> = vec!["-d".as_ref(), db.url.as_ref()];
            rss_args.extend(["--dir".as_ref(), dir.as_os_str()]);
            rss_args.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
            notes.push(match floors::peak_rss_mib(bin, &rss_args, dir).await {
                Ok(mib) => format!("peak RSS {mib:.1} MiB (/usr/bin/time)"),
                Err(reason) => format!("peak RSS not measured: {reason}"),
            });
            let cli_median = median(&times);
            table.add(label, &times, notes);
            if let Some(server) = kind.server() {
                let label = format!(
                    "b. floor: {} process, connect + SELECT 1",
                    floor_client(server)
                );
                let mut floor = vec![];
                for _ in 0..NOOP_REPS {
                    match floors::connect_and_query(server, &db.url).await {
                        Ok(elapsed) => floor.push(ms(elapsed)),
                        Err(reason) => {
                            table.skip(label.clone(), reason);
                            return Ok(());
                        }
                    }
                }
                let ratio = cli_median / median(&floor);
                table.add(
                    label,
                    &floor,
                    vec![format!("the CLI no-op above is {ratio:.2}x this floor")],
                );
            }
        }
    }
    Ok(())
}

fn floor_client(server: Server) -> &'static str {
    match server {
        Server::Postgres => "psql -1",
        Server::Mysql => "mysql",
        Server::Mongo => "(none)",
    }
}

/// The server's own client applying `dir` to fresh databases: per-migration samples, and a
/// note comparing dirthara's per-migration median with them.
async fn apply_floor(
    server: Server,
    dir: &Path,
    ours: f64,
    commit_each: bool,
) -> BenchResult<(Vec<f64>, String)> {
    let mut samples = vec![];
    for rep in 1..=APPLY_REPS {
        eprintln!(
            "[a] floor: {} apply {TRIVIAL}, rep {rep}/{APPLY_REPS}",
            floor_client(server)
        );
        let db = TestDb::try_create(server).await?;
        let elapsed = floors::apply(server, &db.url, dir, commit_each).await?;
        let rows = count_tables(server, &db.url).await?;
        if rows != TRIVIAL {
            return Err(format!("the client created {rows} of {TRIVIAL} tables"));
        }
        samples.push(ms(elapsed) / TRIVIAL as f64);
    }
    let floor = median(&samples);
    Ok((
        samples,
        format!(
            "dirthara per migration above: {} ms = floor + {} ms ({:.2}x)",
            fmt_ms(ours),
            fmt_ms(ours - floor),
            ours / floor
        ),
    ))
}

/// Tables in the bench database (the floor creates one per migration).
async fn count_tables(server: Server, url: &str) -> BenchResult<i64> {
    let counted = match server {
        Server::Postgres => {
            let mut c = PgConnection::connect(url)
                .await
                .map_err(|e| e.to_string())?;
            let n = sqlx::query_scalar(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            )
            .fetch_one(&mut c)
            .await;
            let _ = c.close().await;
            n
        }
        Server::Mysql => {
            let mut c = MySqlConnection::connect(url)
                .await
                .map_err(|e| e.to_string())?;
            let n = sqlx::query_scalar(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
            )
            .fetch_one(&mut c)
            .await;
            let _ = c.close().await;
            n
        }
        Server::Mongo => return Err(unmeasured(server)),
    };
    counted.map_err(|e| format!("counting tables: {e}"))
}

/// Process start-up alone, to read the CLI rows against.
async fn bench_cli_startup(bin: &BenchResult<PathBuf>, table: &mut Table) -> BenchResult<()> {
    let label = "b. CLI `dirthara --version` (process start, no database)";
    let bin = match bin {
        Ok(bin) => bin,
        Err(reason) => {
            table.skip(label, reason.clone());
            return Ok(());
        }
    };
    let mut times = vec![];
    for _ in 0..NOOP_REPS {
        let mut cmd = tokio::process::Command::from(clean_command(bin));
        cmd.arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        times.push(ms(run_cli(cmd).await?.0));
    }
    table.add(label, &times, vec![]);
    Ok(())
}

/// Loading and validating the 1,000 migrations, with no database at all: both steps (what
/// a command that can reverse reads), and the up files alone (what `migrate` reads).
fn bench_load(table: &mut Table) -> BenchResult<()> {
    for (downs, label) in [
        (
            true,
            format!("up and down, {} files, as rollback reads", 2 * TRIVIAL),
        ),
        (false, format!("up only, {TRIVIAL} files, as migrate reads")),
    ] {
        let migrations = trivial_migrations(TRIVIAL, downs);
        let migrator = Migrator::new(config("sqlite::memory:", migrations.path(), Locking::Off));
        let mut times = vec![];
        for _ in 0..NOOP_REPS {
            let started = Instant::now();
            let loaded = migrator.load().map_err(|e| e.to_string())?;
            times.push(ms(started.elapsed()));
            if loaded.len() != TRIVIAL as usize {
                return Err(format!("loaded {} of {TRIVIAL} migrations", loaded.len()));
            }
        }
        table.add(
            format!("a/b. load + validate {TRIVIAL} migrations, {label} (no database)"),
            &times,
            vec![],
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// c: eight CLI runners at once
// ---------------------------------------------------------------------------------------

async fn bench_contention(
    server: Server,
    bin: &BenchResult<PathBuf>,
    table: &mut Table,
) -> BenchResult<()> {
    let single = format!(
        "c. 1 CLI runner, {CONTENDED} pending, {} (baseline)",
        server.label()
    );
    let racing = format!(
        "c. {RUNNERS} CLI runners at once, {CONTENDED} pending, {}",
        server.label()
    );
    let bin = match bin {
        Ok(bin) => bin,
        Err(reason) => {
            table.skip(single, reason.clone());
            table.skip(racing, reason.clone());
            return Ok(());
        }
    };
    let migrations = trivial_migrations(CONTENDED, true);
    let dir = migrations.path();
    let args = ["--output", "json", "migrate"];

    let mut times = vec![];
    for rep in 1..=CONTENTION_REPS {
        eprintln!("[c] 1 runner, rep {rep}/{CONTENTION_REPS}");
        let db = TestDb::try_create(server).await?;
        let (elapsed, output) = run_cli(cli(bin, &db.url, dir, &args)).await?;
        if try_applied_versions(&output)?.len() != CONTENDED as usize {
            return Err(format!(
                "the single runner did not apply all: {}",
                describe(&output)
            ));
        }
        times.push(ms(elapsed));
    }
    let single_median = median(&times);
    table.add(single, &times, vec![]);

    let (mut times, mut finish_spread) = (vec![], vec![]);
    for rep in 1..=CONTENTION_REPS {
        eprintln!("[c] {RUNNERS} runners at once, rep {rep}/{CONTENTION_REPS}");
        let db = TestDb::try_create(server).await?;
        let started = Instant::now();
        let mut waits = Vec::with_capacity(RUNNERS);
        for _ in 0..RUNNERS {
            let child = cli(bin, &db.url, dir, &args)
                .spawn()
                .map_err(|e| format!("starting the CLI: {e}"))?;
            waits.push(tokio::spawn(async move {
                let output = child.wait_with_output().await;
                (started.elapsed(), output)
            }));
        }
        let mut finished = Vec::with_capacity(RUNNERS);
        let mut applied = Vec::with_capacity(RUNNERS);
        for wait in waits {
            let (at, output) = wait.await.map_err(|e| e.to_string())?;
            let output = output.map_err(|e| format!("waiting for a runner: {e}"))?;
            if !output.status.success() {
                return Err(format!("a runner failed: {}", describe(&output)));
            }
            applied.push(try_applied_versions(&output)?.len());
            finished.push(ms(at));
        }
        let wall = finished.iter().copied().fold(0.0, f64::max);
        let first = finished.iter().copied().fold(f64::INFINITY, f64::min);
        let rows = count_history(server, &db.url).await?;
        let winners = applied.iter().filter(|&&n| n > 0).count();
        if rows != CONTENDED || winners != 1 || applied.iter().sum::<usize>() != CONTENDED as usize
        {
            return Err(format!(
                "expected one runner to apply all {CONTENDED} and {CONTENDED} history rows; \
                 got applied per runner {applied:?} and {rows} rows"
            ));
        }
        times.push(wall);
        finish_spread.push(wall - first);
    }
    table.add(
        racing,
        &times,
        vec![
            format!(
                "every rep: all {RUNNERS} exited 0, exactly {CONTENDED} history rows, one runner \
                 applied all {CONTENDED} and the others none"
            ),
            format!(
                "first-to-last finish spread: median {} ms",
                fmt_ms(median(&finish_spread))
            ),
            format!(
                "{:.2}x the single runner's median",
                median(&times) / single_median
            ),
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// d: lock hand-over latency
// ---------------------------------------------------------------------------------------

struct Handover {
    /// B's `lock_acquired.at` − A's `lock_released.at`, in ms: the events' own stamps.
    latency: f64,
    /// B's whole wait for the lock, as it reports it.
    b_waited: f64,
}

async fn handover_once(url: &str, dir: &Path) -> BenchResult<Handover> {
    let a_acquired = Arc::new(tokio::sync::Notify::new());
    let a_released = Arc::new(Mutex::new(None::<SystemTime>));
    let b_acquired = Arc::new(Mutex::new(None::<(SystemTime, Duration)>));
    let b_waiting = Arc::new(AtomicBool::new(false));

    let sink_a = {
        let (acquired, released) = (Arc::clone(&a_acquired), Arc::clone(&a_released));
        EventSink::new(move |event| match event.kind {
            EventKind::LockAcquired { .. } => acquired.notify_one(),
            EventKind::LockReleased { .. } => *released.lock().unwrap() = Some(event.at),
            _ => {}
        })
    };
    let sink_b = {
        let (acquired, waiting) = (Arc::clone(&b_acquired), Arc::clone(&b_waiting));
        EventSink::new(move |event| match event.kind {
            EventKind::LockWaiting { .. } => waiting.store(true, Ordering::SeqCst),
            EventKind::LockAcquired { waited, .. } => {
                *acquired.lock().unwrap() = Some((event.at, waited));
            }
            _ => {}
        })
    };

    let a = Migrator::new(config(url, dir, Locking::Auto)).with_events(sink_a);
    let a_task = tokio::spawn(async move { a.migrate().await });
    tokio::time::timeout(Duration::from_secs(30), a_acquired.notified())
        .await
        .map_err(|_| "runner A did not take the lock within 30 s".to_string())?;
    let b = Migrator::new(config(url, dir, Locking::Auto)).with_events(sink_b);
    let b_task = tokio::spawn(async move { b.migrate().await });

    let ra = a_task
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("runner A: {e}"))?;
    let rb = b_task
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("runner B: {e}"))?;
    if ra.applied.len() != 1 || !rb.applied.is_empty() {
        return Err(format!(
            "expected A to apply 1 and B none; A applied {}, B {}",
            ra.applied.len(),
            rb.applied.len()
        ));
    }
    if !b_waiting.load(Ordering::SeqCst) {
        return Err("runner B never waited for the lock".into());
    }
    let released = a_released
        .lock()
        .unwrap()
        .ok_or("runner A reported no lock_released")?;
    let (acquired, waited) = b_acquired
        .lock()
        .unwrap()
        .ok_or("runner B reported no lock_acquired")?;
    let latency = match acquired.duration_since(released) {
        Ok(after) => ms(after),
        Err(before) => -ms(before.duration()),
    };
    Ok(Handover {
        latency,
        b_waited: ms(waited),
    })
}

/// How the runners of (d) reach the server.
#[derive(Clone, Copy, PartialEq)]
enum Reach {
    /// TCP to the server's own address and port: plainly direct, so no pooler check.
    Direct,
    /// PostgreSQL's Unix socket (`DIRTHARA_TEST_POSTGRES_SOCKET`, default
    /// `/var/run/postgresql`): not provably direct, so the lock takes the full check that no
    /// transaction pooler stands in between (a second connection, tokens read back).
    Socket,
}

async fn bench_handover(server: Server, reach: Reach, table: &mut Table) -> BenchResult<()> {
    let label = match reach {
        Reach::Direct => format!("d. lock hand-over latency, {}", server.label()),
        Reach::Socket => format!("d. lock hand-over latency, {} by socket", server.label()),
    };
    let db = match TestDb::try_create(server).await {
        Ok(db) => db,
        Err(reason) => {
            table.skip(label, reason);
            return Ok(());
        }
    };
    let url = match reach {
        Reach::Direct => db.url.clone(),
        Reach::Socket => {
            let dir = std::env::var("DIRTHARA_TEST_POSTGRES_SOCKET")
                .unwrap_or_else(|_| "/var/run/postgresql".to_string());
            // The socket's directory as the host, percent-encoded, as sqlx reads it.
            format!(
                "postgres://postgres@{}:{}/{}",
                dir.replace('/', "%2F"),
                db.port(),
                db.name
            )
        }
    };
    let migrations = Migrations::new();
    let (mut latencies, mut waits) = (vec![], vec![]);
    for i in 1..=HANDOVER_REPS as i64 {
        if i % 5 == 1 {
            eprintln!("[d] {}: rep {i}/{HANDOVER_REPS}", server.label());
        }
        // A new version each round: A applies it (holding the lock), B finds nothing to do.
        migrations.add(i, &format!("hold{i}"), &server.sleep(HOLD_SECONDS), None);
        let sample = handover_once(&url, migrations.path()).await?;
        latencies.push(sample.latency);
        waits.push(sample.b_waited);
    }
    let rows = count_history(server, &db.url).await?;
    if rows != HANDOVER_REPS as i64 {
        return Err(format!(
            "expected {HANDOVER_REPS} history rows, found {rows}"
        ));
    }
    table.add(
        label,
        &latencies,
        vec![format!(
            "B lock_acquired.at - A lock_released.at; A holds with {}; B waited median {} ms",
            server.sleep(HOLD_SECONDS),
            fmt_ms(median(&waits))
        )],
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------

/// Runs one scenario, turning its failure into a row instead of ending the bench.
fn record(table: &mut Table, label: &str, result: BenchResult<()>) {
    if let Err(reason) = result {
        eprintln!("FAILED {label}: {reason}");
        table.skip(label.to_string(), format!("failed: {reason}"));
    }
}

/// The 1/5/15-minute load averages: the machine may be shared, and the figures with it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_string())
}

async fn header(bin: &BenchResult<PathBuf>) -> (bool, bool) {
    println!("dirthara migration benchmarks");
    println!(
        "  machine: {} logical CPU(s), {} {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    println!("  load average at start: {}", load_average());
    let postgres_up = match XactCounter::connect().await {
        Ok(mut c) => {
            let version = c.text("SELECT version()").await;
            let fsync = c.text("SHOW fsync").await;
            let sync = c.text("SHOW synchronous_commit").await;
            println!("  PostgreSQL: {version} (fsync={fsync}, synchronous_commit={sync})");
            true
        }
        Err(reason) => {
            println!("  PostgreSQL: not reachable ({reason})");
            false
        }
    };
    let mysql_up = match MySqlConnection::connect(&Server::Mysql.admin_url()).await {
        Ok(mut c) => {
            let version: String = sqlx::query_scalar(
                "SELECT CAST(CONCAT(VERSION(), ' (innodb_flush_log_at_trx_commit=', \
                 @@innodb_flush_log_at_trx_commit, ')') AS CHAR)",
            )
            .fetch_one(&mut c)
            .await
            .unwrap_or_else(|e| format!("? ({e})"));
            println!("  MariaDB/MySQL: {version}");
            true
        }
        Err(e) => {
            println!("  MariaDB/MySQL: not reachable ({e})");
            false
        }
    };
    match bin {
        Ok(bin) => println!("  CLI: {}", bin.display()),
        Err(reason) => println!("  CLI: {reason}"),
    }
    println!();
    (postgres_up, mysql_up)
}

/// Whether scenario `key` runs: all of them, unless `DIRTHARA_BENCH_ONLY` lists some
/// (comma-separated: load, startup, pg, mysql, sqlite, contention-pg, contention-mysql,
/// noop-by-history, round-trips, handover-pg, handover-mysql).
fn wanted(key: &str) -> bool {
    match std::env::var("DIRTHARA_BENCH_ONLY") {
        Ok(only) if !only.trim().is_empty() => only.split(',').any(|k| k.trim() == key),
        _ => true,
    }
}

#[tokio::main]
async fn main() {
    let started = Instant::now();
    let bin = cli_binary();
    let (postgres_up, mysql_up) = header(&bin).await;
    let mut table = Table::default();

    if wanted("load") {
        let result = bench_load(&mut table);
        record(&mut table, "a/b. load", result);
    }
    if wanted("startup") {
        let result = bench_cli_startup(&bin, &mut table).await;
        record(&mut table, "b. CLI start-up", result);
    }

    if !wanted("pg") {
    } else if postgres_up {
        let result = bench_apply_and_noop(Kind::Postgres, &bin, &mut table).await;
        record(&mut table, "a/b. PostgreSQL", result);
    } else {
        table.skip("a/b. PostgreSQL", "PostgreSQL is not reachable");
    }
    if !wanted("mysql") {
    } else if mysql_up {
        let result = bench_apply_and_noop(Kind::Mysql, &bin, &mut table).await;
        record(&mut table, "a/b. MariaDB", result);
    } else {
        table.skip("a/b. MariaDB", "MariaDB is not reachable");
    }
    if wanted("sqlite") {
        let result = bench_apply_and_noop(Kind::Sqlite, &bin, &mut table).await;
        record(&mut table, "a/b. SQLite", result);
    }

    if !wanted("contention-pg") {
    } else if postgres_up {
        let result = bench_contention(Server::Postgres, &bin, &mut table).await;
        record(&mut table, "c. concurrent CLI runners, PostgreSQL", result);
    } else {
        table.skip("c. concurrent CLI runners", "PostgreSQL is not reachable");
    }
    if !wanted("contention-mysql") {
    } else if mysql_up {
        let result = bench_contention(Server::Mysql, &bin, &mut table).await;
        record(&mut table, "c. concurrent CLI runners, MariaDB", result);
    } else {
        table.skip(
            "c. concurrent CLI runners, MariaDB",
            "MariaDB is not reachable",
        );
    }

    for (server, up) in [(Server::Postgres, postgres_up), (Server::Mysql, mysql_up)] {
        let Ok(bin) = &bin else { break };
        if up && wanted("noop-by-history") {
            let result = scaling::noop_by_history(server, bin, &mut table).await;
            record(
                &mut table,
                &format!("e. no-op by history size, {}", server.label()),
                result,
            );
        }
        if up && wanted("round-trips") {
            let result = scaling::round_trips(server, bin, &mut table).await;
            record(
                &mut table,
                &format!("f. round trips, {}", server.label()),
                result,
            );
        }
    }

    if wanted("handover-pg") {
        let result = bench_handover(Server::Postgres, Reach::Direct, &mut table).await;
        record(&mut table, "d. hand-over, PostgreSQL", result);
    }
    if wanted("handover-pg-socket") {
        let result = bench_handover(Server::Postgres, Reach::Socket, &mut table).await;
        record(&mut table, "d. hand-over, PostgreSQL by socket", result);
    }
    if wanted("handover-mysql") {
        let result = bench_handover(Server::Mysql, Reach::Direct, &mut table).await;
        record(&mut table, "d. hand-over, MariaDB", result);
    }

    println!();
    table.print();
    println!();
    println!(
        "bench finished in {:.1} s; load average at end: {}",
        started.elapsed().as_secs_f64(),
        load_average()
    );
}
