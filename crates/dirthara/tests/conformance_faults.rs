//! The conformance kit's lock checks catch the planted faults: with each fault of
//! `dirthara_core::failpoints` switched on in this process, the check that guards its
//! guarantee fails on every row where the fault applies. (Without the faults the same checks
//! pass: `tests/conformance.rs`.) Tests only, under the `failpoints` feature:
//!
//! `cargo test -p dirthara --features failpoints --test conformance_faults`
//!
//! The faults are switched on for the whole process, so the faults run one after another,
//! never beside each other.

// The whole kit is compiled; only the lock checks that catch a fault are run here.
#[path = "conformance/checks.rs"]
#[allow(dead_code, unused_macros, unused_imports)]
mod checks;
#[path = "conformance/lock_checks.rs"]
#[allow(dead_code, unused_macros, unused_imports)]
mod lock_checks;
#[path = "conformance/targets.rs"]
mod targets;

use std::future::Future;
use tokio::sync::Mutex;

use dirthara::Locking;
use dirthara_test_kit::servers::Server;
use targets::Row;

/// One fault at a time: the failpoint registry is the process's.
static ONE_FAULT: Mutex<()> = Mutex::const_new(());

/// Runs `check` on `row` with `fault` switched on (`action`: the `fail` crate's, e.g.
/// `return` or `return(1000)`), and asserts that it fails. A row whose server is not there
/// is skipped, as in the kit itself.
async fn caught<R, C, F>(fault: &str, action: &str, row: R, check: C)
where
    R: Future<Output = Option<Row>>,
    C: FnOnce(Row) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let Some(target) = row.await else {
        return;
    };
    // Held across the check: no other fault may be switched on meanwhile.
    let _one = ONE_FAULT.lock().await;
    fail::cfg(fault, action).unwrap();
    let run = tokio::spawn(tokio::time::timeout(lock_checks::WATCHDOG, check(target)));
    let outcome = run.await;
    fail::remove(fault);
    match outcome {
        Err(panic) if panic.is_panic() => {}
        Err(other) => panic!("{fault}: {other}"),
        Ok(Err(_)) => panic!("{fault}: the check hung past the watchdog instead of failing"),
        Ok(Ok(())) => panic!("{fault}: the check passed with the fault switched on"),
    }
}

macro_rules! caught_on {
    ($name:ident: $fault:literal, $action:literal, $check:ident on [$($row:expr),+ $(,)?]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            $(
                caught($fault, $action, $row, |target| async move {
                    lock_checks::$check(&target).await
                })
                .await;
            )+
        }
    };
}

caught_on!(session_lock_not_taken_is_caught_by_two_runners:
"session_lock_not_taken", "return",
two_runners_at_once_apply_each_migration_exactly_once on [
    Row::server(Server::Postgres, Locking::Auto),
    Row::server(Server::Mysql, Locking::Auto),
]);

caught_on!(lock_key_per_process_is_caught_by_two_runners:
"lock_key_per_process", "return",
two_runners_at_once_apply_each_migration_exactly_once on [
    Row::server(Server::Postgres, Locking::Auto),
    Row::server(Server::Mysql, Locking::Auto),
]);

// Not the race of two runners started at once: on SQLite the second runner's busy handler
// can lose every turn to the first (which takes the write lock again between migrations) and
// find nothing left, so the race missed this fault on a loaded machine. A bounded waiter
// started while the lease is held must give up with `MIGRATION_LOCK_HELD`; with the fault it
// never does, whatever the timing.
caught_on!(lease_taken_while_held_is_caught_by_a_bounded_waiter:
"lease_taken_while_held", "return",
a_bounded_wait_gives_up_and_never_takes_the_lock_later on [
    Row::sqlite(Locking::Lease),
    Row::server(Server::Postgres, Locking::Lease),
    Row::server(Server::Mysql, Locking::Lease),
    Row::server(Server::Mongo, Locking::Auto),
]);

caught_on!(lease_released_whoever_holds_it_is_caught_by_the_lost_lock_check:
"lease_released_whoever_holds_it", "return",
a_lost_lock_stops_the_run_before_its_next_migration on [
    Row::sqlite(Locking::Lease),
    Row::server(Server::Postgres, Locking::Lease),
    Row::server(Server::Mysql, Locking::Lease),
    Row::server(Server::Mongo, Locking::Auto),
]);

caught_on!(lock_confirmed_blindly_is_caught_by_the_lost_lock_check:
"lock_confirmed_blindly", "return",
a_lost_lock_stops_the_run_before_its_next_migration on [
    Row::sqlite(Locking::Lease),
    Row::server(Server::Postgres, Locking::Auto),
    Row::server(Server::Postgres, Locking::Lease),
    Row::server(Server::Mysql, Locking::Auto),
    Row::server(Server::Mysql, Locking::Lease),
    Row::server(Server::Mongo, Locking::Auto),
]);

caught_on!(record_after_step_is_caught_by_the_watcher:
"record_after_step", "return(1000)",
a_watcher_never_sees_an_effect_without_its_record on [
    Row::sqlite(Locking::Lease),
    Row::server(Server::Postgres, Locking::Auto),
]);

caught_on!(no_running_marker_is_caught_by_the_watcher:
"no_running_marker", "return(1000)",
a_watcher_never_sees_an_effect_without_its_record on [
    Row::server(Server::Mysql, Locking::Auto),
]);
