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

mod servers;

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use servers::{dirthara, spawn, text, wait_with_watchdog, Migrations, Server, TestDb};
use sqlx::{Connection, Executor, Row};

static SERIAL: Mutex<()> = Mutex::new(());

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Postgres,
    Mysql,
    Sqlite,
    Mongo,
}

/// Where one round runs: a fresh SQLite file or a fresh server database.
enum Place {
    Sqlite(tempfile::TempDir),
    Server(TestDb),
}

impl Place {
    fn url(&self) -> String {
        match self {
            Place::Sqlite(dir) => format!("sqlite:{}", dir.path().join("chaos.db").display()),
            Place::Server(db) => db.url.clone(),
        }
    }
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
            let docs = vec![r#"{"x": "chaos"}"#; 3000].join(", ");
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

/// What the database holds: the markers that exist, and `chaos_effects` rows per version.
struct Effects {
    markers: Vec<u64>,
    rows: BTreeMap<u64, u64>,
}

fn marker_version(name: &str) -> Option<u64> {
    name.strip_prefix('m')?.parse().ok()
}

async fn effects(kind: Kind, place: &Place) -> Effects {
    let (names, pairs): (Vec<String>, Vec<(u64, u64)>) = match place {
        Place::Sqlite(_) => {
            let mut c = sqlx::SqliteConnection::connect(&place.url()).await.unwrap();
            let names = c
                .fetch_all("SELECT name FROM sqlite_master WHERE type = 'table'")
                .await
                .unwrap();
            let rows = c
                .fetch_all("SELECT version, COUNT(*) FROM chaos_effects GROUP BY version")
                .await
                .unwrap();
            (
                names.iter().map(|r| r.get::<String, _>(0)).collect(),
                rows.iter()
                    .map(|r| (r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64))
                    .collect(),
            )
        }
        Place::Server(db) if kind == Kind::Mongo => {
            use mongodb::bson::{doc, Document};
            let mongo = db.mongo().await;
            let mut rows = BTreeMap::new();
            let mut cursor = mongo
                .collection::<Document>("chaos_effects")
                .find(doc! {})
                .await
                .unwrap();
            while cursor.advance().await.unwrap() {
                let d = cursor.deserialize_current().unwrap();
                let v = d
                    .get_i32("version")
                    .map(i64::from)
                    .or_else(|_| d.get_i64("version"));
                *rows.entry(v.unwrap() as u64).or_insert(0) += 1;
            }
            (db.tables().await, rows.into_iter().collect())
        }
        Place::Server(db) => {
            let sql = if kind == Kind::Postgres {
                "SELECT version::text || ' ' || count(*)::text FROM chaos_effects GROUP BY version"
            } else {
                "SELECT CONCAT(version, ' ', COUNT(*)) FROM chaos_effects GROUP BY version"
            };
            let rows = db.strings(sql).await.into_iter().map(|line| {
                let (v, n) = line.split_once(' ').unwrap();
                (v.parse().unwrap(), n.parse().unwrap())
            });
            (db.tables().await, rows.collect())
        }
    };
    let mut markers: Vec<u64> = names.iter().filter_map(|n| marker_version(n)).collect();
    markers.sort_unstable();
    Effects {
        markers,
        rows: pairs.into_iter().collect(),
    }
}

/// Migration states as `status --output json` reports them.
fn states(url: &str, m: &Migrations, extra: &[&str]) -> BTreeMap<u64, String> {
    let mut args = vec!["status", "--output", "json"];
    args.extend_from_slice(extra);
    let out = dirthara(url, m.path(), &args).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("status is not JSON ({e}): {:?}", text(&out)));
    doc["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let state = m["state"].as_str().unwrap().to_string();
            (m["version"].as_u64().unwrap(), state)
        })
        .collect()
}

#[derive(Debug, Default)]
struct Outcome {
    applied: usize,
    absent: usize,
    dirty: usize,
}

/// The truth check. `finished`: after the clean run, everything must be applied.
async fn checkpoint(
    kind: Kind,
    place: &Place,
    m: &Migrations,
    n: u64,
    extra: &[&str],
    finished: bool,
) -> Outcome {
    let states = states(&place.url(), m, extra);
    let effects = effects(kind, place).await;
    let mut outcome = Outcome::default();
    let context = || {
        format!(
            "{kind:?} states {states:?} markers {:?} rows {:?}",
            effects.markers, effects.rows
        )
    };
    for v in 1..=n {
        let marker = effects.markers.contains(&v);
        let rows = effects.rows.get(&v).copied().unwrap_or(0);
        assert!(
            rows <= 1,
            "migration {v} applied {rows} times: {}",
            context()
        );
        match states.get(&v).map(String::as_str) {
            Some("applied") => {
                outcome.applied += 1;
                assert!(
                    marker,
                    "migration {v} recorded without its effect: {}",
                    context()
                );
                // A resolved DIRTY (`--applied`) may lack the row its step never reached.
                if !finished {
                    assert_eq!(
                        rows,
                        1,
                        "migration {v} recorded, effect incomplete: {}",
                        context()
                    );
                }
            }
            Some("pending") => {
                outcome.absent += 1;
                assert!(
                    !marker && rows == 0,
                    "migration {v} took effect unrecorded: {}",
                    context()
                );
            }
            Some("dirty") => outcome.dirty += 1,
            other => panic!("migration {v} in state {other:?}: {}", context()),
        }
    }
    assert!(
        outcome.dirty <= 1,
        "more than one running record: {}",
        context()
    );
    if finished {
        assert_eq!(outcome.applied as u64, n, "{}", context());
    }
    outcome
}

fn restart_server(kind: Kind) {
    let sh = |script: &str| {
        let out = Command::new("sh").arg("-c").arg(script).output().unwrap();
        (out.status.success(), format!("{script}: {:?}", text(&out)))
    };
    match kind {
        Kind::Postgres => {
            let (ok, log) = sh("pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart -m fast");
            assert!(ok, "{log}");
        }
        Kind::Mysql => {
            let _ = sh("mysqladmin -uroot --protocol=tcp shutdown");
            let started = Instant::now();
            // Starting while the old server still exits would find it "already running".
            while sh("start-stop-daemon --status --exec /usr/sbin/mariadbd").0 {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "mariadbd does not stop"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            let (ok, log) =
                sh("start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd");
            assert!(ok, "{log}");
        }
        _ => unreachable!("only server backends restart"),
    }
}

/// Waits until the server accepts a query again after a restart.
async fn wait_until_answering(place: &Place) {
    let Place::Server(db) = place else { return };
    let started = Instant::now();
    loop {
        let ok = match db.server {
            Server::Postgres => match sqlx::PgConnection::connect(&db.url).await {
                Ok(mut c) => c.execute("SELECT 1").await.is_ok(),
                Err(_) => false,
            },
            Server::Mysql => match sqlx::MySqlConnection::connect(&db.url).await {
                Ok(mut c) => c.execute("SELECT 1").await.is_ok(),
                Err(_) => false,
            },
            Server::Mongo => return,
        };
        if ok {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the server never came back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
        None => Place::Sqlite(tempfile::tempdir().unwrap()),
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
    // Resolve DIRTY by looking: the marker exists, so the step ran; else it did not.
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

async fn chaos(kind: Kind) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rounds = setting("DIRTHARA_CHAOS_ROUNDS", 1);
    let mut tally = Tally::default();
    let started = Instant::now();
    for _ in 0..rounds {
        if !round(kind, &mut tally).await {
            return;
        }
    }
    eprintln!(
        "chaos {kind:?} in {:.0}s: {tally:?}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_postgres() {
    chaos(Kind::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_mariadb() {
    chaos(Kind::Mysql).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_sqlite_lease_processes_sharing_one_file() {
    chaos(Kind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_mongodb_lease() {
    chaos(Kind::Mongo).await;
}
