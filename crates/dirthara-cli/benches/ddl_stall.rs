//! The stall benchmark's rows for knowing what a migration does before it runs (issue 29),
//! on PostgreSQL: how long a steady client (one short query every 20 ms, each timed) is
//! blocked while a migration runs.
//!
//! ```text
//! cargo build --release -p dirthara-cli
//! cargo bench -p dirthara-cli --bench ddl_stall
//! ```
//!
//! Rows:
//! - **rewrite**: `ALTER TABLE big ALTER COLUMN n TYPE bigint` on a table of R rows (3 million
//!   by default, about 200 MB; `DIRTHARA_STALL_ROWS`), the client reading `big`:
//!   - `unchecked` (`--blocking-table-size off`, every other runner's behaviour, and
//!     dirthara's before the check): the client waits for the whole rewrite;
//!   - `default`: refused before anything runs (`BLOCKING_DDL`), the client never waits;
//!   - `recipe`: docs/ddl-safety.md's safe pattern for another column — add a `bigint`
//!     column, backfill it in batches of 50,000 rows in a `no-transaction` file, swap the
//!     names — the client waits at most `table_lock_timeout` + 0.2 s;
//! - **statements**: four `ALTER`s in one transaction while readers of the second, third and
//!   fourth tables end 0.9 timeouts apart, the client reading the first table;
//! - **partitions**: one `ALTER` of a table with 8 partitions while readers of three
//!   partitions end 0.9 timeouts apart, the client reading the parent.
//!
//! Targets: `default` refuses and the client's largest latency stays near its quiet one;
//! `recipe`, `statements` and `partitions`: largest latency ≤ timeout (2 s) + 0.2 s. The
//! servers and the clean environment are the test suite's (`tests/support`);
//! `DIRTHARA_BENCH_BIN` overrides `target/release/dirthara`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor};

#[path = "../tests/support/mod.rs"]
mod support;

use support::servers::{Server, TestDb};
use support::{dirthara_with, Migrations};

const TIMEOUT: Duration = Duration::from_secs(2);

fn binary() -> Option<PathBuf> {
    let bin = std::env::var_os("DIRTHARA_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/dirthara")
        });
    bin.exists().then_some(bin)
}

/// A client on its own connection running `query` every 20 ms until stopped; its
/// latencies.
fn client(url: &str, query: &str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Duration>> {
    let (url, query) = (url.to_string(), query.to_string());
    tokio::spawn(async move {
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let mut latencies = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let began = Instant::now();
            conn.execute(query.as_str()).await.unwrap();
            latencies.push(began.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        latencies
    })
}

/// A transaction that read `table`, ended after `hold`.
fn reader(url: &str, table: &str, hold: Duration) -> tokio::task::JoinHandle<()> {
    let (url, read) = (url.to_string(), format!("SELECT count(*) FROM {table}"));
    tokio::spawn(async move {
        let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
        c.execute(format!("BEGIN; {read}").as_str()).await.unwrap();
        tokio::time::sleep(hold).await;
        c.execute("COMMIT").await.unwrap();
    })
}

struct Outcome {
    code: Option<i32>,
    stderr: String,
    largest: Duration,
    quiet: Duration,
    took: Duration,
}

/// Runs `migrate` of `m` (with `args`) while the client runs `query`; readers of `held`
/// end 0.9 timeouts apart, the first 0.9 timeouts after the run starts.
async fn measured(
    db: &TestDb,
    bin: &Path,
    m: &Migrations,
    args: &[&str],
    query: &str,
    held: &[&str],
) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    let watching = client(&db.url, query, stop.clone());
    let readers: Vec<_> = (held.iter().enumerate())
        .map(|(n, table)| reader(&db.url, table, TIMEOUT.mul_f64(0.9 * (n + 1) as f64)))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    let mut all = vec!["migrate"];
    all.extend(args);
    let mut cmd = dirthara_with(bin, &db.url, m.path(), &all);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let took = began.elapsed();
    for reader in readers {
        reader.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    let mut latencies = watching.await.unwrap();
    latencies.sort();
    Outcome {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        largest: latencies.last().copied().unwrap_or_default(),
        quiet: latencies[latencies.len() / 2],
        took,
    }
}

fn report(row: &str, mode: &str, outcome: &Outcome, target: Option<(&str, bool)>) -> bool {
    println!(
        "{row:<11} {mode:<10} exit {:?}  client largest {:>7.3} s (median {:>6.4} s)  run {:>6.2} s",
        outcome.code,
        outcome.largest.as_secs_f64(),
        outcome.quiet.as_secs_f64(),
        outcome.took.as_secs_f64()
    );
    match target {
        Some((what, met)) => {
            println!(
                "            target {what}: {}",
                if met { "met" } else { "MISSED" }
            );
            met
        }
        None => true,
    }
}

/// The rewrite row, on a table of `rows` rows.
async fn rewrite(db: &TestDb, bin: &Path, rows: u64) -> usize {
    let began = Instant::now();
    db.execute(&format!(
        "CREATE TABLE big (id int PRIMARY KEY, n int, m int, payload text);\
         INSERT INTO big SELECT i, i, i, md5(i::text) || md5((i * 7)::text) \
         FROM generate_series(1, {rows}) i; ANALYZE big;"
    ))
    .await;
    let size = db
        .strings("SELECT pg_size_pretty(pg_total_relation_size('big'))")
        .await;
    println!(
        "rewrite: `big` of {rows} rows ({}), made in {:.1} s",
        size.join(""),
        began.elapsed().as_secs_f64()
    );
    let query = "SELECT n FROM big WHERE id = 1";
    let widen = Migrations::new();
    widen.add(
        1,
        "widen_n",
        "ALTER TABLE big ALTER COLUMN n TYPE bigint;",
        None,
    );
    let mut missed = 0;

    // Refused before anything runs: the client never waits.
    let refused = measured(
        db,
        bin,
        &widen,
        &["--history-table", "h_default"],
        query,
        &[],
    )
    .await;
    let held = refused.code == Some(1)
        && refused.stderr.contains("Error [BLOCKING_DDL]")
        && refused.largest < refused.quiet + Duration::from_millis(200);
    missed += usize::from(!report(
        "rewrite",
        "default",
        &refused,
        Some((
            "refused before anything ran; largest <= median + 0.2 s",
            held,
        )),
    ));

    // docs/ddl-safety.md's recipe, on `m`: add, backfill in batches, swap.
    let recipe = Migrations::new();
    recipe.add(
        1,
        "add_m_big",
        "ALTER TABLE big ADD COLUMN m_big bigint;",
        None,
    );
    let batches: String = (0..rows.div_ceil(50_000))
        .map(|b| {
            format!(
                "UPDATE big SET m_big = m WHERE id > {} AND id <= {};\n",
                b * 50_000,
                (b + 1) * 50_000
            )
        })
        .collect();
    recipe.add(
        2,
        "backfill_m_big",
        &format!("-- dirthara:no-transaction\n{batches}"),
        None,
    );
    recipe.add(
        3,
        "swap_m",
        "ALTER TABLE big RENAME COLUMN m TO m_old;\nALTER TABLE big RENAME COLUMN m_big TO m;",
        None,
    );
    let safe = measured(
        db,
        bin,
        &recipe,
        &["--history-table", "h_recipe"],
        query,
        &[],
    )
    .await;
    let held = safe.code == Some(0) && safe.largest <= TIMEOUT + Duration::from_millis(200);
    missed += usize::from(!report(
        "rewrite",
        "recipe",
        &safe,
        Some(("applied; largest <= timeout + 0.2 s", held)),
    ));

    // Every other runner's behaviour: the whole rewrite under ACCESS EXCLUSIVE.
    let unchecked = measured(
        db,
        bin,
        &widen,
        &[
            "--history-table",
            "h_unchecked",
            "--blocking-table-size",
            "off",
        ],
        query,
        &[],
    )
    .await;
    report("rewrite", "unchecked", &unchecked, None);
    missed
}

/// The statements and partitions rows.
async fn shares(db: &TestDb, bin: &Path) -> usize {
    let mut missed = 0;
    db.execute(
        "CREATE TABLE t1 (id int PRIMARY KEY); CREATE TABLE t2 (id int); \
         CREATE TABLE t3 (id int); CREATE TABLE t4 (id int); INSERT INTO t1 VALUES (1);",
    )
    .await;
    let four = Migrations::new();
    four.add(
        1,
        "four",
        "ALTER TABLE t1 ADD COLUMN c int;\nALTER TABLE t2 ADD COLUMN c int;\n\
         ALTER TABLE t3 ADD COLUMN c int;\nALTER TABLE t4 ADD COLUMN c int;",
        None,
    );
    let outcome = measured(
        db,
        bin,
        &four,
        &["--history-table", "h_four"],
        "SELECT id FROM t1 WHERE id = 1",
        &["t2", "t3", "t4"],
    )
    .await;
    let held = outcome.code == Some(0) && outcome.largest <= TIMEOUT + Duration::from_millis(200);
    missed += usize::from(!report(
        "statements",
        "default",
        &outcome,
        Some(("applied; largest <= timeout + 0.2 s", held)),
    ));

    let partitions: String = (0..8)
        .map(|p| {
            format!(
                "CREATE TABLE events_{p} PARTITION OF events FOR VALUES FROM ({}) TO ({});",
                p * 100,
                (p + 1) * 100
            )
        })
        .collect();
    db.execute(&format!(
        "CREATE TABLE events (id int, k int) PARTITION BY RANGE (k); {partitions} \
         INSERT INTO events SELECT i, i FROM generate_series(0, 799) i;"
    ))
    .await;
    let alter = Migrations::new();
    alter.add(1, "events_c", "ALTER TABLE events ADD COLUMN c int;", None);
    let outcome = measured(
        db,
        bin,
        &alter,
        &["--history-table", "h_events"],
        "SELECT count(*) FROM events WHERE k = 1",
        &["events_3", "events_5", "events_7"],
    )
    .await;
    let held = outcome.code == Some(0) && outcome.largest <= TIMEOUT + Duration::from_millis(200);
    missed += usize::from(!report(
        "partitions",
        "default",
        &outcome,
        Some(("applied; largest <= timeout + 0.2 s", held)),
    ));
    missed
}

fn main() {
    let Some(bin) = binary() else {
        eprintln!(
            "SKIPPED: no target/release/dirthara; `cargo build --release -p dirthara-cli` first"
        );
        return;
    };
    let rows: u64 = std::env::var("DIRTHARA_STALL_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let Some(db) = TestDb::create(Server::Postgres).await else {
            return;
        };
        let missed = shares(&db, &bin).await + rewrite(&db, &bin, rows).await;
        if missed > 0 {
            eprintln!("{missed} row(s) missed a target");
            std::process::exit(1);
        }
    });
}
