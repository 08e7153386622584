//! The lock's own conformance checks, run against every real row (`tests/conformance.rs`):
//! several runners at once, a waiter, a bounded wait, a lock lost mid-run, release on every
//! path, `refresh` and `fresh` under one lock, a release failure, the lease's heartbeat, and
//! a watcher that must never see a migration's effect without its record. Each check is a
//! race the lock must win on the real database, watched from connections of the test's own,
//! never from a call log; each runs under a deadlock watchdog
//! ([`conformance_lock_tests!`]), as golang-migrate's `TestLockAndUnlock` does.
//!
//! `tests/conformance_faults.rs` runs them again with each planted fault switched on, and
//! shows that they fail.

use std::future::Future;
use std::time::{Duration, Instant};

use dirthara::{
    Code, ErrorKind, LockHolder, LockState, LockStrategy, LockWait, Migrator, RunReport,
};

use super::checks::{Files, Target};

/// What the lock checks need of a database beyond [`Target`]: steps that take time, record
/// that they ran, or take the run's lock away; and reads of the database from outside.
pub(crate) trait LockTarget: Target {
    /// A step that sleeps `ms` milliseconds.
    fn sleep(&self, ms: u64) -> String;

    /// One step made of `steps`, in order.
    fn join(&self, steps: &[&str]) -> String;

    /// A step that notes one execution of migration `version` in the table (collection)
    /// `runs`, which migration 1 of these checks creates.
    fn note_run(&self, version: i64) -> String;

    /// A step that takes the running command's lock away: the database's own unlock for a
    /// session lock, the lease row deleted for a lease, and with `intruder` another runner's
    /// lease written in its place, valid for ten minutes (as after an operator's
    /// `unlock --force` and another runner's acquire).
    fn lose_lock(&self, intruder: bool) -> String;

    /// A step whose first statement (command) fails: nothing of it stays.
    fn fails_at_once(&self) -> String;

    /// How many executions `runs` holds.
    fn runs(&self) -> impl Future<Output = usize>;

    /// How many migrations the history holds as `applied` or `running` (0 without one).
    fn recorded(&self) -> impl Future<Output = usize>;

    /// Makes releasing the lock fail, from outside, while `holder` holds it: its session
    /// ended, or the lease's table dropped. `false` where the database cannot be made to
    /// (a lease whose release then finds nothing to delete only warns).
    fn break_release(&self, holder: &LockHolder) -> impl Future<Output = bool>;

    /// Whose lease the lease table holds, if any.
    fn lease_owner(&self) -> impl Future<Output = Option<String>>;

    /// These checks run on this database one at a time. The MongoDB-compatible test server
    /// is one Python process: its `sleep` is thousands of inserts, and two such checks at
    /// once on a loaded machine retry each other's write conflicts for minutes.
    fn one_check_at_a_time(&self) -> bool {
        false
    }
}

/// Held by the check running on a database that takes one at a time (see
/// [`LockTarget::one_check_at_a_time`]); taken before the watchdog starts, so the wait for
/// the check before is not counted as this one's deadlock.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The longest a check may take before the watchdog calls it a deadlock.
pub(crate) const WATCHDOG: Duration = Duration::from_secs(120);

fn waiting<T: Target>(target: &T, files: &Files<'_, T>, wait: LockWait) -> Migrator {
    let directory = files.path().to_path_buf();
    target.migrator(&move |config| {
        config.directories = vec![directory.clone()];
        config.lock_wait = Some(wait);
    })
}

fn forever<T: Target>(target: &T, files: &Files<'_, T>) -> Migrator {
    waiting(target, files, LockWait::Forever)
}

fn at_once<T: Target>(target: &T, files: &Files<'_, T>) -> Migrator {
    waiting(target, files, LockWait::For(Duration::ZERO))
}

/// Migration 1 creates `runs`; each of 2..=`last` notes its run there, after `ms` of work.
fn counted<T: LockTarget>(target: &T, last: i64, ms: u64) -> Files<'_, T> {
    let files = Files::new(target);
    files.add(1, "runs", &target.create("runs"), None);
    for version in 2..=last {
        let step = target.join(&[&target.sleep(ms), &target.note_run(version)]);
        files.add(version, &format!("m{version}"), &step, None);
    }
    files
}

/// Waits until someone holds the lock, and says who.
async fn held_by(migrator: &Migrator) -> LockHolder {
    let started = Instant::now();
    loop {
        if let LockState::Held { holder, .. } = migrator.lock_status().await.unwrap().state {
            return holder;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nobody took the lock within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until nobody holds the lock.
async fn until_free(migrator: &Migrator) {
    let started = Instant::now();
    while !matches!(
        migrator.lock_status().await.unwrap().state,
        LockState::Free | LockState::Stale { .. }
    ) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the lock was not let go within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn locked(target: &impl Target) -> bool {
    target.strategy() != LockStrategy::Off
}

/// `n` runners started at once apply each migration exactly once between them: every runner
/// succeeds (the others wait, then find nothing left), one batch holds them all, and each
/// migration's step ran once.
async fn runners_at_once<T: LockTarget>(target: &T, n: usize) {
    let files = counted(target, 6, 40);
    let runners: Vec<_> = (0..n)
        .map(|_| {
            let migrator = forever(target, &files);
            tokio::spawn(async move { migrator.migrate().await })
        })
        .collect();
    let mut applied = Vec::new();
    for runner in runners {
        let report: RunReport = runner.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
        applied.extend(report.applied.iter().map(|s| s.version));
    }
    applied.sort_unstable();
    assert_eq!(applied, (1..=6).collect::<Vec<_>>(), "applied between them");
    assert_eq!(target.runs().await, 5, "executions of migrations 2 to 6");
    assert_eq!(target.recorded().await, 6);
}

pub(crate) async fn two_runners_at_once_apply_each_migration_exactly_once(
    target: &impl LockTarget,
) {
    if locked(target) {
        runners_at_once(target, 2).await;
    }
}

pub(crate) async fn eight_runners_at_once_apply_each_migration_exactly_once(
    target: &impl LockTarget,
) {
    if locked(target) {
        runners_at_once(target, 8).await;
    }
}

/// A runner that waits for the lock plans against what the holder left: nothing.
pub(crate) async fn a_waiter_finds_nothing_left_to_do(target: &impl LockTarget) {
    if !locked(target) {
        return;
    }
    let files = counted(target, 3, 600);
    let holder = forever(target, &files);
    let first = tokio::spawn(async move { holder.migrate().await });
    held_by(&forever(target, &files)).await;
    let waiter = forever(target, &files).migrate().await.unwrap();
    assert!(waiter.applied.is_empty(), "the waiter applied {waiter:?}");
    assert_eq!(first.await.unwrap().unwrap().applied.len(), 3);
    assert_eq!(target.runs().await, 2);
}

/// A wait bounded at 200 ms gives up with `MIGRATION_LOCK_HELD` while the holder works, and
/// its attempt never completes later: once the holder is done the lock is free, and a third
/// runner that will not wait takes it at once.
pub(crate) async fn a_bounded_wait_gives_up_and_never_takes_the_lock_later(
    target: &impl LockTarget,
) {
    if !locked(target) {
        return;
    }
    let files = counted(target, 2, 1500);
    let holder = forever(target, &files);
    let first = tokio::spawn(async move { holder.migrate().await });
    held_by(&forever(target, &files)).await;
    let started = Instant::now();
    let bounded = waiting(target, &files, LockWait::For(Duration::from_millis(200)));
    let error = bounded.migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::MigrationLockHeld, "{error}");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "gave up early"
    );
    assert_eq!(first.await.unwrap().unwrap().applied.len(), 2);
    until_free(&forever(target, &files)).await;
    let third = at_once(target, &files).migrate().await.unwrap();
    assert!(third.applied.is_empty(), "{third:?}");
    assert_eq!(target.runs().await, 1);
}

/// A lock taken away during a run stops it before its next migration, and the run's end
/// lets go of nothing that is not its own: migration 2 lets the session lock go, or deletes
/// the lease and writes another runner's in its place; the run stops before migration 3
/// (`LOCK_LEASE_LOST`), which never runs, and the other runner's lease is still there.
pub(crate) async fn a_lost_lock_stops_the_run_before_its_next_migration(target: &impl LockTarget) {
    if !locked(target) {
        return;
    }
    let files = Files::new(target);
    files.add(1, "runs", &target.create("runs"), None);
    files.add(2, "lose", &target.lose_lock(true), None);
    files.add(3, "next", &target.note_run(3), None);
    let error = forever(target, &files).migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::LockLeaseLost, "{error}");
    match error.kind() {
        ErrorKind::LockLost { next, .. } => {
            assert_eq!(next.as_ref().map(|n| n.0), Some(3), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(target.runs().await, 0, "migration 3 ran without the lock");
    if target.strategy() == LockStrategy::Lease {
        assert_eq!(
            target.lease_owner().await.as_deref(),
            Some("intruder"),
            "the stopped run deleted another runner's lease"
        );
    }
}

/// Whatever a command ends with, the lock is free afterwards: a runner that will not wait
/// gets it at once after a success, a run with nothing to do, a failed migration, a refused
/// plan and a lost lock.
pub(crate) async fn the_lock_is_free_after_every_path(target: &impl LockTarget) {
    if !locked(target) {
        return;
    }
    let files = Files::new(target);
    files.add_table(1, "t_a");
    let then_free = |what: &'static str| {
        let files = &files;
        async move {
            let status = forever(target, files).lock_status().await.unwrap();
            assert!(
                matches!(status.state, LockState::Free),
                "after {what}: {status:?}"
            );
        }
    };
    at_once(target, &files).migrate().await.unwrap();
    then_free("a success").await;
    at_once(target, &files).migrate().await.unwrap();
    then_free("nothing to do").await;
    files.add(2, "broken", &target.fails_at_once(), None);
    let error = at_once(target, &files).migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::MigrationFailed, "{error}");
    then_free("a failed migration").await;
    files.remove(&format!("2_broken.{}", target.extension()));
    files.rewrite_up(1, "t_a", &target.create_changed("t_a"));
    let error = at_once(target, &files).migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::ChecksumMismatch, "{error}");
    then_free("a refused plan").await;
    files.rewrite_up(1, "t_a", &target.create("t_a"));
    files.add(2, "lose", &target.lose_lock(false), None);
    files.add_table(3, "t_c");
    let error = at_once(target, &files).migrate().await.unwrap_err();
    assert_eq!(error.code(), Code::LockLeaseLost, "{error}");
    then_free("a lost lock").await;
}

/// `refresh` and `fresh` hold one lock across both halves: a runner that starts waiting
/// while they work finds nothing to do when it gets the lock, and a watcher polling the lock
/// from its own connection never sees the command's lock free and then held by it again, nor
/// the command holding it anew (another `since`).
pub(crate) async fn refresh_and_fresh_hold_one_lock_across_both_halves(target: &impl LockTarget) {
    if !locked(target) {
        return;
    }
    let files = Files::new(target);
    for (version, table) in [(1, "t_a"), (2, "t_b"), (3, "t_c")] {
        let up = target.join(&[&target.create(table), &target.sleep(150)]);
        let down = target.join(&[&target.drop(table), &target.sleep(150)]);
        files.add(version, table, &up, Some(&down));
    }
    forever(target, &files).migrate().await.unwrap();
    for fresh in [false, true] {
        let runner = forever(target, &files);
        let run = tokio::spawn(async move {
            match fresh {
                true => runner.fresh().await,
                false => runner.refresh().await,
            }
        });
        let watcher = forever(target, &files);
        let first = held_by(&watcher).await;
        let waiter = forever(target, &files);
        let waiter = tokio::spawn(async move { waiter.migrate().await });
        let mut let_go = false;
        while !run.is_finished() {
            match watcher.lock_status().await.unwrap().state {
                LockState::Held { holder, .. } if same_holder(&holder, &first) => {
                    assert!(
                        !let_go,
                        "fresh = {fresh}: the lock was let go, then taken again"
                    );
                }
                LockState::Held { holder, .. } => {
                    // The waiter, once the command is over; never the command anew.
                    assert!(
                        holder.application.is_none() || holder.application != first.application,
                        "fresh = {fresh}: the command took its lock anew: {first} then {holder}"
                    );
                    let_go = true;
                }
                _ => let_go = true,
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        let report = run.await.unwrap().unwrap();
        assert_eq!(report.applied.len(), 3, "fresh = {fresh}: {report:?}");
        let waited = waiter.await.unwrap().unwrap();
        assert!(
            waited.applied.is_empty(),
            "fresh = {fresh}: a runner got the lock between the halves: {waited:?}"
        );
    }
}

/// The same holding: the session or lease, taken at the same moment by the same runner.
fn same_holder(a: &LockHolder, b: &LockHolder) -> bool {
    (a.session_id, &a.application, &a.client_address, &a.since)
        == (b.session_id, &b.application, &b.client_address, &b.since)
}

/// A release that fails is attached to the run's own error, never put in its place: the
/// lock is broken from outside while migration 1 works, and migration 2 fails.
pub(crate) async fn a_release_failure_is_attached_to_the_runs_own_error(target: &impl LockTarget) {
    if !locked(target) {
        return;
    }
    let files = Files::new(target);
    files.add(1, "slow", &target.sleep(1500), None);
    files.add(2, "broken", &target.broken("t_b"), None);
    let runner = forever(target, &files);
    let run = tokio::spawn(async move { runner.migrate().await });
    let holder = held_by(&forever(target, &files)).await;
    if !target.break_release(&holder).await {
        run.await.unwrap().unwrap_err();
        return;
    }
    let error = run.await.unwrap().unwrap_err();
    let secondary = error
        .secondary()
        .unwrap_or_else(|| panic!("no release failure under {error}"));
    assert_eq!(secondary.code(), Code::MigrationLockFailed, "{error}");
    assert!(
        secondary.to_string().contains("releas"),
        "the secondary is not the release: {secondary}"
    );
}

/// A lease outlives its time-to-live while the run lasts: its heartbeat renews it, so a run
/// of about 1.5 TTLs (TTL 5 s; longer on a loaded machine) stays protected throughout, and a
/// runner that will not wait is turned away every time it tries. A lease that was not renewed
/// would lapse two seconds before the run ends, and the next try (0.7 s apart) would get in. The steps are short: SQLite renews only between steps
/// (its documented limit), and its stand-in for a sleep is work that a loaded machine slows.
pub(crate) async fn the_lease_heartbeat_keeps_a_run_of_several_ttls_protected(
    target: &impl LockTarget,
) {
    if target.strategy() != LockStrategy::Lease {
        return;
    }
    let files = Files::new(target);
    files.add(1, "runs", &target.create("runs"), None);
    for version in 2..=13 {
        let step = target.join(&[&target.sleep(600), &target.note_run(version)]);
        files.add(version, &format!("m{version}"), &step, None);
    }
    let ttl = |files: &Files<'_, _>| {
        let directory = files.path().to_path_buf();
        target.migrator(&move |config| {
            config.directories = vec![directory.clone()];
            config.lock_ttl = dirthara::MIN_LOCK_TTL;
            config.lock_wait = Some(LockWait::For(Duration::ZERO));
        })
    };
    let runner = ttl(&files);
    let run = tokio::spawn(async move { runner.migrate().await });
    held_by(&forever(target, &files)).await;
    let mut tries = 0;
    while !run.is_finished() {
        match ttl(&files).migrate().await {
            Err(e) if e.code() == Code::MigrationLockHeld => tries += 1,
            // Past the end of the run: nothing left.
            Ok(report) if report.applied.is_empty() => {}
            other => panic!("a runner got past a live lease: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let report = run.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.applied.len(), 13);
    assert!(tries >= 5, "turned away only {tries} times");
    assert_eq!(target.runs().await, 12);
}

/// A watcher reading the database from outside never sees a migration's effect without its
/// record: a step commits with its `applied` record (PostgreSQL, SQLite) or after its
/// `running` marker (MySQL, MongoDB). Effects are read before records, and records only grow
/// during `migrate`, so a read pair can only break the rule if the database did.
pub(crate) async fn a_watcher_never_sees_an_effect_without_its_record(target: &impl LockTarget) {
    let files = counted(target, 8, 120);
    let runner = forever(target, &files);
    let run = tokio::spawn(async move { runner.migrate().await });
    let mut observations = 0;
    while !run.is_finished() {
        let effects = target.runs().await;
        let records = target.recorded().await;
        // Migration 1 creates `runs` and notes nothing: each note has a record besides it.
        assert!(
            effects < records || effects == 0,
            "{effects} execution(s) seen with only {records} record(s)"
        );
        observations += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    run.await.unwrap().unwrap();
    assert!(observations > 5, "watched only {observations} times");
    assert_eq!(target.runs().await, 7);
}

/// One test per lock check for each row, each under the deadlock watchdog: as
/// `checks::conformance_tests!`, for the checks of this file.
macro_rules! conformance_lock_tests {
    ($($row:ident => $target:expr),* $(,)?) => {
        $(
            $crate::lock_checks::conformance_lock_tests!(@row $row, $target, [
                two_runners_at_once_apply_each_migration_exactly_once,
                eight_runners_at_once_apply_each_migration_exactly_once,
                a_waiter_finds_nothing_left_to_do,
                a_bounded_wait_gives_up_and_never_takes_the_lock_later,
                a_lost_lock_stops_the_run_before_its_next_migration,
                the_lock_is_free_after_every_path,
                refresh_and_fresh_hold_one_lock_across_both_halves,
                a_release_failure_is_attached_to_the_runs_own_error,
                the_lease_heartbeat_keeps_a_run_of_several_ttls_protected,
                a_watcher_never_sees_an_effect_without_its_record,
            ]);
        )*
    };
    (@row $row:ident, $target:expr, [$($check:ident),* $(,)?]) => {
        mod $row {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    if let Some(target) = $target.await {
                        let _turn = match crate::lock_checks::LockTarget::one_check_at_a_time(&target) {
                            true => Some(crate::lock_checks::ONE_AT_A_TIME.lock().await),
                            false => None,
                        };
                        let check = crate::lock_checks::$check(&target);
                        if tokio::time::timeout(crate::lock_checks::WATCHDOG, check).await.is_err() {
                            panic!(
                                "deadlock watchdog: {} did not finish within {:?}",
                                stringify!($check),
                                crate::lock_checks::WATCHDOG
                            );
                        }
                    }
                }
            )*
        }
    };
}

pub(crate) use conformance_lock_tests;
