//! Chaos: K runners migrate one database while runners are SIGKILLed at random and (on
//! PostgreSQL and MariaDB) the server restarts mid-round. The checker (`chaos_truth`) then
//! judges the round from one snapshot of the database and from what every runner printed:
//! each migration applied and recorded once, or neither, or left as the one `running`
//! (DIRTY) record; its step executed once, give or take the attempts a kill or restart cut
//! off; each runner ended as the design allows. DIRTY is then resolved by looking at the
//! effect, and a clean run must finish.
//!
//! The servers that restart are private instances this test makes (`initdb`,
//! `mariadb-install-db`) and removes; the machine's servers are never stopped.
//! `DIRTHARA_CHAOS_RESTART=0` skips the restarts, and then runs on the test servers of
//! `DIRTHARA_TEST_*_URL` instead.
//!
//! Short by default (CI). Long: `fuzz/chaos.sh`, or set `DIRTHARA_CHAOS_ROUNDS`,
//! `DIRTHARA_CHAOS_RUNNERS`, `DIRTHARA_CHAOS_MIGRATIONS`, `DIRTHARA_CHAOS_SECONDS`.
//! `DIRTHARA_CHAOS_RUNNER_ENV="K=V K2=V2"` passes variables to every runner: a planted fault
//! (`FAILPOINTS=lock_key_per_process=return`, one of `crates/dirthara/src/failpoints.rs`) in a
//! build with the `failpoints` feature (`cargo test -p dirthara-cli --features failpoints
//! --test chaos`); `DIRTHARA_CHAOS_EXPECT_VIOLATIONS=1` then requires the checker to report
//! at least one violation. `tests/planted_faults.rs` does this for every fault, in short.
//!
//! The tests take [`SERIAL`] in turn: on two cores, two rounds of six runners at once would
//! measure the machine, not the product.

mod chaos_truth;
mod support;

use std::sync::Mutex;
use std::time::Instant;

use chaos_truth::{round, setting, Kind, Settings, Tally, Target};
use support::private_server::PrivateServer;
use support::servers::{Server, TestDb};

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs the rounds for one backend and fails with every violation found.
fn chaos(kind: Kind) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let restarts = setting("DIRTHARA_CHAOS_RESTART", 1) == 1;
    let Some(mut target) = Target::new(
        kind,
        restarts && matches!(kind, Kind::Postgres | Kind::Mysql),
    ) else {
        return;
    };
    let mut settings = Settings::from_env();
    settings.runner_env = std::env::var("DIRTHARA_CHAOS_RUNNER_ENV")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Without the feature the runners ignore FAILPOINTS, and the fault would go "unnoticed".
    assert!(
        cfg!(feature = "failpoints") || !settings.runner_env.iter().any(|(k, _)| k == "FAILPOINTS"),
        "FAILPOINTS needs a dirthara built with the `failpoints` feature: \
         cargo test -p dirthara-cli --features failpoints --test chaos"
    );
    let rounds = setting("DIRTHARA_CHAOS_ROUNDS", 1);
    let mut tally = Tally::default();
    let mut violations = Vec::new();
    let started = Instant::now();
    for number in 1..=rounds {
        let round_started = Instant::now();
        let Some(report) = runtime.block_on(round(&mut target, &settings)) else {
            return;
        };
        eprintln!(
            "chaos {kind:?} round {number}/{rounds}: {} violation(s) in {:.1}s",
            report.violations.len(),
            round_started.elapsed().as_secs_f64()
        );
        tally.add(&report.tally);
        for v in report.violations {
            eprintln!("chaos {kind:?} round {number}: {v}");
            violations.push(format!("round {number}: {v}"));
        }
    }
    eprintln!(
        "chaos {kind:?} in {:.0}s, {} violation(s): {tally:?}",
        started.elapsed().as_secs_f64(),
        violations.len()
    );
    if setting("DIRTHARA_CHAOS_EXPECT_VIOLATIONS", 0) == 1 {
        assert!(
            !violations.is_empty(),
            "the planted fault went unnoticed: {tally:?}"
        );
    } else {
        assert!(violations.is_empty(), "{}", violations.join("\n"));
    }
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

/// A private server restarts on its own data directory and port, and is gone, process and
/// directory, once dropped.
async fn private_server_lifecycle(server: Server) {
    let Some(mut private) = PrivateServer::start_or_skip(server) else {
        return;
    };
    let url = private.admin_url();
    let db = TestDb::try_create_at(server, &url).await.unwrap();
    db.execute("CREATE TABLE kept (id INT)").await;
    let before = private.pid().unwrap();
    private.restart().unwrap();
    assert_ne!(private.pid(), Some(before), "a new server process");
    assert_eq!(private.admin_url(), url, "the same port");
    assert!(db.tables().await.contains(&"kept".to_string()));
    drop(db);
    let (root, pid) = (private.root().to_path_buf(), private.pid().unwrap());
    drop(private);
    assert!(!root.exists(), "{} left behind", root.display());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "server {pid} still running"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_postgres_restarts_on_its_own_data_and_is_gone_once_dropped() {
    private_server_lifecycle(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_mariadb_restarts_on_its_own_data_and_is_gone_once_dropped() {
    private_server_lifecycle(Server::Mysql).await;
}
