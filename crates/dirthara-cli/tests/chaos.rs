//! Chaos: K runners migrate one database while runners are SIGKILLed at random and (on
//! PostgreSQL and MariaDB) the server restarts mid-run. After every round the history must
//! tell the truth: each migration applied and recorded once, or neither, or left as the one
//! `running` (DIRTY) record; never a record without its effect, never an effect without a
//! record. Then DIRTY is resolved by looking at the effect, and a clean run finishes.
//!
//! Short by default (CI). Long: `fuzz/chaos.sh`, or set `DIRTHARA_CHAOS_ROUNDS`,
//! `DIRTHARA_CHAOS_RUNNERS`, `DIRTHARA_CHAOS_MIGRATIONS`, `DIRTHARA_CHAOS_SECONDS`.
//! `DIRTHARA_CHAOS_RESTART=0` skips the server restarts (a server this test may not control).
//!
//! A restart hits every test using the server at that moment, so this binary holds nothing
//! but chaos tests, and they take [`SERIAL`] in turn (cargo runs test binaries one by one).

mod chaos_truth;
mod support;

use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chaos_truth::{checkpoint, effects, restart_server, states, wait_until_answering, Kind, Place};
use sqlx::{Connection, Executor};
use support::servers::{Server, TestDb};
use support::{dirthara, scratch_dir, spawn, text, wait_with_watchdog, Migrations};

static SERIAL: Mutex<()> = Mutex::new(());

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Migration `v`: creates its marker (table or collection `m<v>`) and inserts a row naming
/// it into `chaos_effects`, which has no unique key, so a second application would show.
/// Every 3rd is slow, every 7th runs outside a transaction, every 11th on PostgreSQL
/// brings its own BEGIN/COMMIT.
fn migration(kind: Kind, v: u64) -> (&'static str, String) {
    let slow = v % 3 == 0;
    let effect =
        format!("CREATE TABLE m{v} (id INT);\nINSERT INTO chaos_effects (version) VALUES ({v});\n");
    let sleep = match kind {
        Kind::Postgres => "SELECT pg_sleep(0.3);\n",
        Kind::Mysql => "SELECT SLEEP(0.3);\n",
        // No sleep function: a few hundred thousand rows of busy work.
        Kind::Sqlite => "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT count(*) FROM c;\n",
        // The test server has no `sleep` command: a few thousand inserts instead.
        Kind::Mongo => "",
    };
    let ballast;
    let sleep = match (slow, kind) {
        (false, _) => "",
        (true, Kind::Mongo) => {
            let docs = vec![r#"{"x": "chaos"}"#; 1000].join(", ");
            ballast = format!(r#"{{"insert": "ballast", "documents": [{docs}]}},"#);
            ballast.as_str()
        }
        (true, _) => sleep,
    };
    if kind == Kind::Mongo {
        let text = format!(
            r#"[{sleep}{{"create": "m{v}"}}, {{"insert": "chaos_effects", "documents": [{{"version": {v}}}]}}]"#
        );
        return ("json", text);
    }
    let text = if kind == Kind::Postgres && v % 11 == 0 {
        format!("BEGIN;\n{effect}SELECT pg_sleep(0.2);\nCOMMIT;\n")
    } else if v % 7 == 0 {
        format!("-- dirthara:no-transaction\n{sleep}{effect}")
    } else {
        format!("{sleep}{effect}")
    };
    ("sql", text)
}

#[derive(Debug, Default)]
struct Tally {
    rounds: u64,
    kills: u64,
    restarts: u64,
    exited_ok: u64,
    exited_with_error: u64,
    applied: usize,
    absent: usize,
    dirty: usize,
    resolved_applied: u64,
    resolved_rolled_back: u64,
}

/// A runner that exited by itself: success, or a coded error — never a panic or a hang.
fn judge_exit(child: Child, tally: &mut Tally) {
    let output = wait_with_watchdog(child, Duration::from_secs(5));
    let (_, stderr) = text(&output);
    match output.status.code() {
        Some(0) => tally.exited_ok += 1,
        Some(1) => {
            assert!(
                stderr.contains("Error ["),
                "an error without a code: {stderr}"
            );
            tally.exited_with_error += 1;
        }
        other => panic!("runner exited {other:?}: {stderr}"),
    }
}

async fn round(kind: Kind, tally: &mut Tally) -> bool {
    let server = match kind {
        Kind::Postgres => Some(Server::Postgres),
        Kind::Mysql => Some(Server::Mysql),
        Kind::Mongo => Some(Server::Mongo),
        Kind::Sqlite => None,
    };
    let place = match server {
        None => Place::Sqlite(scratch_dir()),
        Some(server) => match TestDb::create(server).await {
            Some(db) => Place::Server(db),
            None => return false,
        },
    };
    let url = place.url();
    match (&place, kind) {
        (Place::Sqlite(_), _) => {
            let mut c = sqlx::SqliteConnection::connect(&format!("{url}?mode=rwc"))
                .await
                .unwrap();
            c.execute("CREATE TABLE chaos_effects (version INT NOT NULL)")
                .await
                .unwrap();
        }
        (Place::Server(db), Kind::Postgres | Kind::Mysql) => {
            db.execute("CREATE TABLE chaos_effects (version INT NOT NULL)")
                .await
        }
        _ => {}
    }
    let n = setting("DIRTHARA_CHAOS_MIGRATIONS", 40);
    let m = Migrations::new();
    for v in 1..=n {
        let (ext, text) = migration(kind, v);
        m.add_as(ext, v as i64, &format!("m{v}"), &text, None);
    }
    // Leases (SQLite, MongoDB) at the 5 s minimum, so a killed holder blocks only briefly.
    let lease: &[&str] = if matches!(kind, Kind::Sqlite | Kind::Mongo) {
        &["--locking", "lease", "--lock-ttl", "5s"]
    } else {
        &[]
    };
    let runner = || {
        let mut args = vec![
            "migrate",
            "--output",
            "json",
            "--lock-wait",
            "60s",
            "--connect-timeout",
            "30s",
        ];
        args.extend_from_slice(lease);
        spawn(dirthara(&url, m.path(), &args))
    };
    let k = setting("DIRTHARA_CHAOS_RUNNERS", 6) as usize;
    let window = Duration::from_secs(setting("DIRTHARA_CHAOS_SECONDS", 4));
    let restarts =
        setting("DIRTHARA_CHAOS_RESTART", 1) == 1 && matches!(kind, Kind::Postgres | Kind::Mysql);
    let mut restart_at = restarts.then(|| window.mul_f64(0.2 + fastrand() * 0.6));
    let mut runners: Vec<Child> = (0..k).map(|_| runner()).collect();
    let started = Instant::now();
    while started.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(100 + (fastrand() * 500.0) as u64)).await;
        let mut alive = Vec::new();
        for mut child in runners.drain(..) {
            match child.try_wait().unwrap() {
                Some(_) => judge_exit(child, tally),
                None => alive.push(child),
            }
        }
        runners = alive;
        if !runners.is_empty() {
            let mut victim = runners.swap_remove((fastrand() * runners.len() as f64) as usize);
            victim.kill().unwrap();
            victim.wait().unwrap();
            tally.kills += 1;
        }
        while runners.len() < k {
            runners.push(runner());
        }
        if restart_at.is_some_and(|at| started.elapsed() >= at) {
            restart_at = None;
            restart_server(kind);
            tally.restarts += 1;
        }
    }
    for mut child in runners {
        if child.try_wait().unwrap().is_some() {
            judge_exit(child, tally);
        } else {
            child.kill().unwrap();
            child.wait().unwrap();
            tally.kills += 1;
        }
    }
    wait_until_answering(&place).await;

    let outcome = checkpoint(kind, &place, &m, n, lease, false).await;
    tally.applied += outcome.applied;
    tally.absent += outcome.absent;
    tally.dirty += outcome.dirty;
    // Resolve DIRTY by looking: the marker exists, so the step ran; else it did not. Look only
    // once no session holds the lock: a killed runner's server session may still be finishing
    // its statement (until the server notices the client is gone), and could commit the step
    // after a look that did not see it. (A lease outlives its holder by design; the lease
    // rounds do not wait for it.)
    if lease.is_empty() {
        wait_until_the_lock_is_free(&url, &m);
    }
    let effects = effects(kind, &place).await;
    for (v, state) in states(&url, &m, lease) {
        if state != "dirty" {
            continue;
        }
        let verdict = if effects.markers.contains(&v) {
            tally.resolved_applied += 1;
            "--applied"
        } else {
            tally.resolved_rolled_back += 1;
            "--rolled-back"
        };
        let version = v.to_string();
        let mut args = vec!["resolve", version.as_str(), verdict, "--lock-wait", "60s"];
        args.extend_from_slice(lease);
        let out = wait_with_watchdog(
            spawn(dirthara(&url, m.path(), &args)),
            Duration::from_secs(90),
        );
        assert!(
            out.status.success(),
            "resolve {v} {verdict}: {:?}",
            text(&out)
        );
    }
    let mut args = vec!["migrate", "--lock-wait", "60s"];
    args.extend_from_slice(lease);
    let out = wait_with_watchdog(
        spawn(dirthara(&url, m.path(), &args)),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "the clean run failed: {:?}",
        text(&out)
    );
    checkpoint(kind, &place, &m, n, lease, true).await;
    tally.rounds += 1;
    true
}

fn fastrand() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Runs the rounds for one backend, holding [`SERIAL`] (outside any runtime, so no test of
/// this binary overlaps a server restart).
fn chaos(kind: Kind) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rounds = setting("DIRTHARA_CHAOS_ROUNDS", 1);
    let mut tally = Tally::default();
    let started = Instant::now();
    for _ in 0..rounds {
        if !runtime.block_on(round(kind, &mut tally)) {
            return;
        }
    }
    eprintln!(
        "chaos {kind:?} in {:.0}s: {tally:?}",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn chaos_postgres() {
    chaos(Kind::Postgres);
}

#[test]
fn chaos_mariadb() {
    chaos(Kind::Mysql);
}

#[test]
fn chaos_sqlite_lease_processes_sharing_one_file() {
    chaos(Kind::Sqlite);
}

#[test]
fn chaos_mongodb_lease() {
    chaos(Kind::Mongo);
}

/// Waits until `status` shows no session holding the session lock.
fn wait_until_the_lock_is_free(url: &str, m: &Migrations) {
    let started = Instant::now();
    loop {
        let out = dirthara(url, m.path(), &["status", "--output", "json"])
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let state = doc["lock"]["state"]
            .as_str()
            .unwrap_or("unknown")
            .to_string();
        if state == "free" {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the lock is still {state} 90 s after the runners stopped: {:?}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
