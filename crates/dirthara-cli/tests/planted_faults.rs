//! Planted faults prove the suite. Each fault breaks one guarantee of the lock or the history
//! in the one place it lives (the library's failpoints, `crates/dirthara/src/failpoints.rs`),
//! is switched on in the runners with `FAILPOINTS`, and the test that guards the guarantee
//! must then fail: the chaos checker reports a violation of the kind the fault causes, or a
//! lock scenario finds its guarantee broken. The same detector must find nothing on the same
//! binary with no fault on, so that its finding is the fault's. The README's "Planted faults"
//! has the table of which detector catches which fault.
//!
//! Needs the `failpoints` feature (`.ci/run` runs it):
//! `cargo test --workspace --features dirthara-cli/failpoints --test planted_faults`.
//!
//! The chaos rounds here are short and run without server restarts, on the test servers of
//! `DIRTHARA_TEST_*_URL`. A fault that shows only when a runner dies in a narrow window
//! (`record_after_step`, `no_running_marker`) carries a pause that widens it, and its rounds
//! run until one finds it, a few at most. The tests take [`SERIAL`] in turn: on two cores,
//! two rounds at once would measure the machine, not the product.

mod chaos_truth;
mod lock_scenarios;
mod support;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use chaos_truth::{round, Kind, Rule, Settings, Target};
use lock_scenarios::Found;
use support::servers::Server;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Every round here, with and without a fault: four runners over 40 migrations for 4 s, with
/// a kill every 100-600 ms, so the holder is among the victims of nearly every round.
fn settings(faults: &str) -> Settings {
    let runner_env = match faults {
        "" => Vec::new(),
        faults => vec![("FAILPOINTS".to_string(), faults.to_string())],
    };
    Settings {
        migrations: 40,
        runners: 4,
        window: Duration::from_secs(4),
        runner_env,
    }
}

/// Chaos rounds on `kind` with `faults` planted in the runners, until one reports a violation
/// of a rule in `expected`, at most `rounds` of them; fails if none does.
fn caught_by_chaos(kind: Kind, faults: &str, expected: &[Rule], rounds: u32) {
    let _serial = serial();
    let runtime = runtime();
    let Some(mut target) = Target::new(kind, false) else {
        return;
    };
    let settings = settings(faults);
    let mut seen = Vec::new();
    for number in 1..=rounds {
        let Some(report) = runtime.block_on(round(&mut target, &settings)) else {
            return;
        };
        let mut rules: BTreeMap<Rule, usize> = BTreeMap::new();
        for v in &report.violations {
            *rules.entry(v.rule).or_default() += 1;
        }
        eprintln!("{kind:?} with {faults}, round {number}: {rules:?}");
        if let Some(caught) = (report.violations.iter()).find(|v| expected.contains(&v.rule)) {
            eprintln!("caught: {caught}");
            return;
        }
        seen.extend(rules.into_keys());
    }
    panic!(
        "{kind:?}: the planted fault {faults} went unnoticed in {rounds} round(s): no \
         violation of {expected:?} (seen: {seen:?})"
    );
}

/// One chaos round on `kind` with no fault, as the fault tests run theirs: nothing found.
fn chaos_finds_nothing(kind: Kind) {
    let _serial = serial();
    let runtime = runtime();
    let Some(mut target) = Target::new(kind, false) else {
        return;
    };
    let Some(report) = runtime.block_on(round(&mut target, &settings(""))) else {
        return;
    };
    let found: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A lock scenario finds nothing with no fault, and its guarantee broken with `faults`.
fn caught_by_scenario<F, Fut>(faults: &'static str, scenario: F)
where
    F: Fn(&'static str) -> Fut,
    Fut: Future<Output = Found>,
{
    let _serial = serial();
    let runtime = runtime();
    match runtime.block_on(scenario("")) {
        None => return,
        Some(Ok(())) => {}
        Some(Err(broken)) => panic!("with no fault planted, the scenario failed: {broken}"),
    }
    match runtime.block_on(scenario(faults)) {
        None => {}
        Some(Ok(())) => panic!("the planted fault {faults} went unnoticed"),
        Some(Err(broken)) => eprintln!("caught {faults}: {broken}"),
    }
}

// --- The detectors with no fault planted.

#[test]
fn chaos_finds_nothing_without_a_fault_postgres() {
    chaos_finds_nothing(Kind::Postgres);
}

#[test]
fn chaos_finds_nothing_without_a_fault_mariadb() {
    chaos_finds_nothing(Kind::Mysql);
}

#[test]
fn chaos_finds_nothing_without_a_fault_sqlite() {
    chaos_finds_nothing(Kind::Sqlite);
}

#[test]
fn chaos_finds_nothing_without_a_fault_mongodb() {
    chaos_finds_nothing(Kind::Mongo);
}

// --- Mutual exclusion: the session lock and the lease.

/// The rules a lost mutual exclusion breaks: runners fail on each other's work (or report
/// DIRTY a migration another is still applying), or a migration runs or is recorded twice.
const EXCLUSION_LOST: [Rule; 7] = [
    Rule::ExitNotAllowed,
    Rule::DirtyNotRunning,
    Rule::ExecutedTooOften,
    Rule::StartedTooOften,
    Rule::FinishedTwice,
    Rule::EffectTwice,
    Rule::SeveralRunning,
];

/// Every runner believes it holds the lock: each is refused by the lock check before its first
/// migration, or trips over another's history table.
#[test]
fn a_session_lock_never_taken_is_caught_by_chaos_postgres() {
    let faults = "session_lock_not_taken=return";
    caught_by_chaos(Kind::Postgres, faults, &EXCLUSION_LOST, 2);
}

#[test]
fn a_session_lock_never_taken_is_caught_by_chaos_mariadb() {
    let faults = "session_lock_not_taken=return";
    caught_by_chaos(Kind::Mysql, faults, &EXCLUSION_LOST, 2);
}

/// Each runner takes a lock of its own, which excludes nobody: they migrate at once.
#[test]
fn a_session_lock_on_a_key_of_its_own_is_caught_by_chaos_postgres() {
    let faults = "lock_key_per_process=return";
    caught_by_chaos(Kind::Postgres, faults, &EXCLUSION_LOST, 2);
}

#[test]
fn a_session_lock_on_a_key_of_its_own_is_caught_by_chaos_mariadb() {
    let faults = "lock_key_per_process=return";
    caught_by_chaos(Kind::Mysql, faults, &EXCLUSION_LOST, 2);
}

/// A runner told it took a lease another holds reads the history unlocked: it reports DIRTY
/// the migration the holder is applying, or stops with `LOCK_LEASE_LOST` at its first
/// migration (where one that does not wait must say `MIGRATION_LOCK_HELD`, and one that
/// waits, wait).
#[test]
fn a_lease_taken_while_held_is_caught_by_chaos_sqlite() {
    let faults = "lease_taken_while_held=return";
    caught_by_chaos(Kind::Sqlite, faults, &EXCLUSION_LOST, 2);
}

#[test]
fn a_lease_taken_while_held_is_caught_by_chaos_mongodb() {
    let faults = "lease_taken_while_held=return";
    caught_by_chaos(Kind::Mongo, faults, &EXCLUSION_LOST, 2);
}

/// The runner whose lease was taken away deletes the next holder's lease as it lets go.
#[test]
fn a_lease_released_whoever_holds_it_is_caught_by_the_lost_lease_test_postgres() {
    caught_by_scenario("lease_released_whoever_holds_it=return", |faults| {
        lock_scenarios::lost_lease_spares_the_new_holder(Server::Postgres, faults)
    });
}

#[test]
fn a_lease_released_whoever_holds_it_is_caught_by_the_lost_lease_test_mariadb() {
    caught_by_scenario("lease_released_whoever_holds_it=return", |faults| {
        lock_scenarios::lost_lease_spares_the_new_holder(Server::Mysql, faults)
    });
}

// --- The lock confirmed before each migration.

/// PostgreSQL: the guard that leads each step's message.
#[test]
fn a_lock_confirmed_blindly_is_caught_by_the_lost_lock_test_postgres() {
    caught_by_scenario("lock_confirmed_blindly=return", |faults| {
        lock_scenarios::lock_released_by_a_migration(Server::Postgres, faults)
    });
}

/// MySQL/MariaDB: the confirmation before each migration.
#[test]
fn a_lock_confirmed_blindly_is_caught_by_the_lost_lock_test_mysql() {
    caught_by_scenario("lock_confirmed_blindly=return", |faults| {
        lock_scenarios::lock_released_by_a_migration(Server::Mysql, faults)
    });
}

/// The lease: renewed by owner id before each migration.
#[test]
fn a_lease_confirmed_blindly_is_caught_by_the_lost_lease_test_postgres() {
    caught_by_scenario("lock_confirmed_blindly=return", |faults| {
        lock_scenarios::lost_lease_spares_the_new_holder(Server::Postgres, faults)
    });
}

#[test]
fn a_lease_confirmed_blindly_is_caught_by_the_lost_lease_test_mariadb() {
    caught_by_scenario("lock_confirmed_blindly=return", |faults| {
        lock_scenarios::lost_lease_spares_the_new_holder(Server::Mysql, faults)
    });
}

// --- The history: a step and its record.

/// A step committed alone, its record a second later: a runner killed in between leaves the
/// effect with no record, which the next runner re-applies.
#[test]
fn a_record_written_after_its_step_is_caught_by_chaos_postgres() {
    caught_by_chaos(
        Kind::Postgres,
        "record_after_step=return(1000)",
        &[Rule::EffectWithoutRecord],
        4,
    );
}

#[test]
fn a_record_written_after_its_step_is_caught_by_chaos_sqlite() {
    caught_by_chaos(
        Kind::Sqlite,
        "record_after_step=return(1000)",
        &[Rule::EffectWithoutRecord],
        4,
    );
}

/// MySQL/MariaDB runs every step bracketed by its `running` marker (DDL commits implicitly):
/// without it, a runner killed after the step leaves its effect unrecorded.
#[test]
fn a_step_without_its_running_marker_is_caught_by_chaos_mariadb() {
    caught_by_chaos(
        Kind::Mysql,
        "no_running_marker=return(1000)",
        &[Rule::EffectWithoutRecord],
        4,
    );
}
