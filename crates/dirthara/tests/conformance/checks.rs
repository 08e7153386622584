//! The backend conformance checks: one function per guarantee that every backend gives,
//! written against the public API only, and run against every row of a table of targets
//! (a database with a lock strategy) by [`conformance_tests!`], one test per check and row.
//!
//! This file is compiled twice: by `tests/conformance.rs` against the real databases, and
//! inside the crate (`src/engine/tests/conformance.rs`) against the in-memory backend, which
//! only the crate's own tests can reach. It therefore names the library `dirthara` (the crate
//! calls itself that in its tests) and uses nothing but the library and `tempfile`.

use std::future::Future;
use std::path::Path;

use dirthara::{
    Code, Command, Config, ErrorKind, LockState, LockStrategy, MigrationState, Migrator,
    Resolution, RollbackScope, RunReport, StatusReport, StepReport,
};

/// A database under test with a lock strategy: one row of the table. It says what differs
/// between databases as far as the checks are concerned, and writes their migrations.
pub(crate) trait Target {
    /// A failed step leaves nothing behind: its DDL rolls back with it.
    fn transactional_ddl(&self) -> bool;

    /// The strategy that protects its commands.
    fn strategy(&self) -> LockStrategy;

    /// A migrator for this database and lock strategy, with the rest of its configuration
    /// (directories, history table) set by `configure`.
    fn migrator(&self, configure: &dyn Fn(&mut Config)) -> Migrator;

    /// Drops `table` (a collection on MongoDB) as an operator would by hand.
    fn drop_table(&self, table: &str) -> impl Future<Output = ()>;

    /// The extension of its migration files (`sql`, `json`).
    fn extension(&self) -> &'static str;

    /// A step that creates `table`.
    fn create(&self, table: &str) -> String;

    /// Other text for the step that creates `table`: its file changed.
    fn create_changed(&self, table: &str) -> String;

    /// A step that drops `table`.
    fn drop(&self, table: &str) -> String;

    /// A step that creates `table`, then fails.
    fn broken(&self, table: &str) -> String;
}

/// A migrations directory for one check, written for its target.
pub(crate) struct Files<'t, T> {
    dir: tempfile::TempDir,
    target: &'t T,
}

impl<'t, T: Target> Files<'t, T> {
    pub(crate) fn new(target: &'t T) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("dirthara-conformance-")
            .tempdir()
            .expect("create a temporary directory");
        Files { dir, target }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, file: &str, text: &str) {
        let path = self.path().join(file);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// `<version>_<name>.up.<ext>` and `.down.<ext>`, or without `down` the irreversible
    /// `<version>_<name>.<ext>`.
    pub(crate) fn add(&self, version: i64, name: &str, up: &str, down: Option<&str>) {
        let ext = self.target.extension();
        match down {
            Some(down) => {
                self.write(&format!("{version}_{name}.up.{ext}"), up);
                self.write(&format!("{version}_{name}.down.{ext}"), down);
            }
            None => self.write(&format!("{version}_{name}.{ext}"), up),
        }
    }

    /// A reversible migration creating `table`.
    pub(crate) fn add_table(&self, version: i64, table: &str) {
        let t = self.target;
        self.add(version, table, &t.create(table), Some(&t.drop(table)));
    }

    /// Replaces the up step of a reversible migration.
    pub(crate) fn rewrite_up(&self, version: i64, name: &str, up: &str) {
        let ext = self.target.extension();
        self.write(&format!("{version}_{name}.up.{ext}"), up);
    }

    pub(crate) fn remove(&self, file: &str) {
        std::fs::remove_file(self.path().join(file)).unwrap();
    }
}

fn migrator<T: Target>(target: &T, files: &Files<'_, T>) -> Migrator {
    let directory = files.path().to_path_buf();
    target.migrator(&move |config| config.directories = vec![directory.clone()])
}

fn versions(steps: &[StepReport]) -> Vec<i64> {
    steps.iter().map(|s| s.version).collect()
}

fn state_of(status: &StatusReport, version: i64) -> MigrationState {
    let migration = status.migrations.iter().find(|m| m.version == version);
    migration
        .unwrap_or_else(|| panic!("no migration {version}"))
        .state
}

/// (version, state, batch) of every migration, as `status` shows them.
fn states(status: &StatusReport) -> Vec<(i64, MigrationState, Option<i64>)> {
    (status.migrations.iter())
        .map(|m| (m.version, m.state, m.batch))
        .collect()
}

/// Three reversible migrations, `t_a`, `t_b`, `t_c`, applied in one batch.
async fn three_applied<T: Target>(target: &T) -> Files<'_, T> {
    let files = Files::new(target);
    for (version, table) in [(1, "t_a"), (2, "t_b"), (3, "t_c")] {
        files.add_table(version, table);
    }
    let report = migrator(target, &files).migrate().await.unwrap();
    assert_eq!(versions(&report.applied), vec![1, 2, 3]);
    files
}

/// `status` and `preview` on an empty database show every migration pending and change
/// nothing: a `migrate` afterwards still starts at batch 1 with all of them.
pub(crate) async fn status_and_preview_of_an_empty_database_record_nothing(target: &impl Target) {
    let files = Files::new(target);
    files.add_table(1, "t_a");
    files.add_table(2, "t_b");
    let run = || migrator(target, &files);
    let status = run().status().await.unwrap();
    assert_eq!(
        states(&status),
        vec![
            (1, MigrationState::Pending, None),
            (2, MigrationState::Pending, None)
        ]
    );
    let preview = run().preview(Command::Migrate).await.unwrap();
    let previewed: Vec<i64> = preview.steps.iter().map(|s| s.version).collect();
    assert_eq!(previewed, vec![1, 2]);
    assert_eq!(preview.steps[0].sql, target.create("t_a"));
    assert_eq!(preview.batch, Some(1));
    assert_eq!(states(&run().status().await.unwrap()), states(&status));
    let report = run().migrate().await.unwrap();
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![1, 2], Some(1))
    );
}

/// `migrate` applies every pending migration in one batch, then finds nothing to do.
pub(crate) async fn migrate_applies_everything_pending_in_one_batch_then_nothing(
    target: &impl Target,
) {
    let files = three_applied(target).await;
    let again = migrator(target, &files).migrate().await.unwrap();
    assert!(again.applied.is_empty(), "{again:?}");
    assert_eq!(again.batch, None);
    let status = migrator(target, &files).status().await.unwrap();
    assert!(
        states(&status)
            .iter()
            .all(|(_, state, batch)| *state == MigrationState::Applied && *batch == Some(1)),
        "{status:?}"
    );
}

/// A later `migrate` is a batch of its own, and rolling back the last batch reverts only it.
pub(crate) async fn rolling_back_the_last_batch_reverts_only_that_batch(target: &impl Target) {
    let files = three_applied(target).await;
    files.add_table(4, "t_d");
    files.add_table(5, "t_e");
    let report = migrator(target, &files).migrate().await.unwrap();
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![4, 5], Some(2))
    );
    let report = (migrator(target, &files))
        .rollback(RollbackScope::LastBatch)
        .await
        .unwrap();
    assert_eq!(versions(&report.reverted), vec![5, 4]);
    let status = migrator(target, &files).status().await.unwrap();
    assert_eq!(
        (1..=5).map(|v| state_of(&status, v)).collect::<Vec<_>>(),
        [
            [MigrationState::Applied; 3].as_slice(),
            &[MigrationState::Pending; 2]
        ]
        .concat()
    );
}

/// Rolling back by steps and to a version, and `migrate_to` in both directions, move exactly
/// as far as asked, newest first on the way down.
pub(crate) async fn rollback_and_migrate_to_move_exactly_as_far_as_asked(target: &impl Target) {
    let files = three_applied(target).await;
    files.add_table(4, "t_d");
    migrator(target, &files).migrate().await.unwrap();
    let run = || migrator(target, &files);
    let reverted = run().rollback(RollbackScope::Steps(2)).await.unwrap();
    assert_eq!(versions(&reverted.reverted), vec![4, 3]);
    assert_eq!(
        versions(&run().migrate_to(3).await.unwrap().applied),
        vec![3]
    );
    let reverted = run().rollback(RollbackScope::To(1)).await.unwrap();
    assert_eq!(versions(&reverted.reverted), vec![3, 2]);
    assert_eq!(
        versions(&run().migrate_to(0).await.unwrap().reverted),
        vec![1]
    );
    assert_eq!(
        versions(&run().migrate().await.unwrap().applied),
        vec![1, 2, 3, 4]
    );
}

/// `refresh` reverts every applied migration, newest first, then applies them all again
/// in one batch.
pub(crate) async fn refresh_reverts_everything_then_reapplies_it_in_one_batch(
    target: &impl Target,
) {
    let files = three_applied(target).await;
    files.add_table(4, "t_d");
    migrator(target, &files).migrate().await.unwrap();
    let report = migrator(target, &files).refresh().await.unwrap();
    assert_eq!(versions(&report.reverted), vec![4, 3, 2, 1]);
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![1, 2, 3, 4], Some(1))
    );
}

/// A command the planner refuses (an unknown target version, reverting an irreversible
/// migration) fails with its code and changes nothing.
pub(crate) async fn a_refused_plan_changes_nothing(target: &impl Target) {
    let files = three_applied(target).await;
    let l = target;
    files.add(4, "irreversible", &l.create("t_d"), None);
    migrator(target, &files).migrate().await.unwrap();
    let before = states(&migrator(target, &files).status().await.unwrap());
    let err = migrator(target, &files).migrate_to(99).await.unwrap_err();
    assert_eq!(err.code(), Code::UnknownVersion);
    let err = (migrator(target, &files))
        .rollback(RollbackScope::Steps(1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::IrreversibleMigration);
    let after = states(&migrator(target, &files).status().await.unwrap());
    assert_eq!(after, before);
}

/// An applied migration whose file changed is refused until its new checksum is accepted.
pub(crate) async fn a_changed_file_is_refused_until_its_checksum_is_accepted(target: &impl Target) {
    let files = three_applied(target).await;
    files.rewrite_up(2, "t_b", &target.create_changed("t_b"));
    let err = migrator(target, &files).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::ChecksumMismatch);
    let report = (migrator(target, &files))
        .resolve(2, Resolution::AcceptChecksum)
        .await
        .unwrap();
    assert_eq!(versions(&report.recorded), vec![2]);
    let report = migrator(target, &files).migrate().await.unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
}

/// `fresh` drops what the migrations do not know of too, and runs on a database whose
/// history names a migration whose file is gone.
pub(crate) async fn fresh_drops_what_is_not_ours_and_reapplies_everything(target: &impl Target) {
    let files = three_applied(target).await;
    let l = target;
    files.add(4, "stray", &l.create("stray"), None);
    migrator(target, &files).migrate().await.unwrap();
    files.remove(&format!("4_stray.{}", l.extension()));
    let err = migrator(target, &files).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MissingMigration);
    let report = migrator(target, &files).fresh().await.unwrap();
    assert!(
        report.dropped.contains(&"stray".to_string()),
        "{:?}",
        report.dropped
    );
    assert_eq!(
        (versions(&report.applied), report.batch),
        (vec![1, 2, 3], Some(1))
    );
}

/// A migration that fails stops the run: what ran before it stays applied, what follows it
/// stays pending, and its own record says what the database kept. With transactional DDL
/// nothing of it stays (pending); without, it is left dirty, and refused until an operator
/// resolves it. Once its file is fixed, the run goes on from it.
pub(crate) async fn a_failed_migration_keeps_what_ran_before_and_records_what_the_database_kept(
    target: &impl Target,
) {
    let files = Files::new(target);
    let l = target;
    files.add_table(1, "t_ok");
    files.add(2, "broken", &l.broken("t_h"), Some(&l.drop("t_h")));
    files.add_table(3, "t_later");
    let err = migrator(target, &files).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed);
    assert_eq!(versions(err.completed()), vec![1]);
    let ErrorKind::MigrationFailed { left_dirty, .. } = err.kind() else {
        panic!("{err:?}");
    };
    assert_eq!(*left_dirty, !target.transactional_ddl(), "{err}");
    let status = migrator(target, &files).status().await.unwrap();
    assert_eq!(
        (state_of(&status, 1), state_of(&status, 3)),
        (MigrationState::Applied, MigrationState::Pending)
    );
    if target.transactional_ddl() {
        assert_eq!(state_of(&status, 2), MigrationState::Pending);
    } else {
        assert_eq!(state_of(&status, 2), MigrationState::Dirty);
        let err = migrator(target, &files).migrate().await.unwrap_err();
        assert_eq!(err.code(), Code::DirtyMigration);
        // The operator drops the half-made table and records the rollback.
        target.drop_table("t_h").await;
        let report = (migrator(target, &files))
            .resolve(2, Resolution::RolledBack)
            .await
            .unwrap();
        assert_eq!(versions(&report.recorded), vec![2]);
    }
    files.rewrite_up(2, "broken", &l.create("t_h"));
    let report = migrator(target, &files).migrate().await.unwrap();
    assert_eq!(versions(&report.applied), vec![2, 3]);
}

/// `baseline` records migrations as applied without running them (here the first would
/// fail if it ran), and `migrate` goes on after them.
pub(crate) async fn baseline_records_without_running_and_migrate_goes_on_after_it(
    target: &impl Target,
) {
    let files = Files::new(target);
    let l = target;
    files.add(1, "made_by_hand", &l.broken("t_by_hand"), None);
    files.add_table(2, "t_b");
    let report = migrator(target, &files).baseline(1).await.unwrap();
    assert_eq!(versions(&report.recorded), vec![1]);
    assert!(report.applied.is_empty(), "{report:?}");
    let report = migrator(target, &files).migrate().await.unwrap();
    assert_eq!(versions(&report.applied), vec![2]);
}

/// A history table of another name is a history of its own: a database already migrated
/// under the default one is adopted there by `baseline`, which leaves the default alone.
pub(crate) async fn a_history_table_of_another_name_keeps_a_history_of_its_own(
    target: &impl Target,
) {
    let files = three_applied(target).await;
    let other = Files::new(target);
    let l = target;
    other.add(1, "a", &l.create("t_a"), None);
    other.add(2, "b2", &l.create("t_b2"), None);
    let adopter = || {
        let directory = other.path().to_path_buf();
        target.migrator(&move |config| {
            config.directories = vec![directory.clone()];
            config.history_table = "adopted_history".to_string();
        })
    };
    let status = adopter().status().await.unwrap();
    assert_eq!(
        states(&status),
        vec![
            (1, MigrationState::Pending, None),
            (2, MigrationState::Pending, None)
        ]
    );
    assert_eq!(
        versions(&adopter().baseline(1).await.unwrap().recorded),
        vec![1]
    );
    assert_eq!(
        versions(&adopter().migrate().await.unwrap().applied),
        vec![2]
    );
    let default = migrator(target, &files).status().await.unwrap();
    assert_eq!(
        states(&default),
        (1..=3)
            .map(|v| (v, MigrationState::Applied, Some(1)))
            .collect::<Vec<_>>()
    );
}

/// Every command names the strategy that protected it, and leaves the lock free when it
/// ends, a failed one included; forcing a free lock open releases nothing.
pub(crate) async fn every_command_names_its_lock_and_leaves_it_free(target: &impl Target) {
    let files = Files::new(target);
    let l = target;
    files.add_table(1, "t_a");
    let free = |report: dirthara::LockReport| {
        assert_eq!(report.strategy, Some(target.strategy()), "{report:?}");
        match target.strategy() {
            LockStrategy::Off => assert_eq!(report.state, LockState::Off, "{report:?}"),
            _ => assert_eq!(report.state, LockState::Free, "{report:?}"),
        }
        assert!(report.others.is_empty(), "{report:?}");
    };
    let report: RunReport = migrator(target, &files).migrate().await.unwrap();
    assert_eq!(report.lock, target.strategy());
    free(migrator(target, &files).lock_status().await.unwrap());

    files.add(2, "broken", &l.broken("t_h"), None);
    let err = migrator(target, &files).migrate().await.unwrap_err();
    assert_eq!(err.code(), Code::MigrationFailed);
    free(migrator(target, &files).lock_status().await.unwrap());
    free(migrator(target, &files).status().await.unwrap().lock);

    let forced = migrator(target, &files).force_unlock().await.unwrap();
    assert!(forced.released.is_empty(), "{forced:?}");
    free(forced.lock);
}

/// One test per check for each row: `checks::conformance_tests! { name => future, }` makes
/// the module `name` with a test for each check, run on the target the row's future makes
/// (`None`: the row's server is not there, and the test is skipped). Invoked where this
/// file is the module `checks`.
macro_rules! conformance_tests {
    ($($row:ident => $target:expr),* $(,)?) => {
        $(
            checks::conformance_tests!(@row $row, $target, [
                status_and_preview_of_an_empty_database_record_nothing,
                migrate_applies_everything_pending_in_one_batch_then_nothing,
                rolling_back_the_last_batch_reverts_only_that_batch,
                rollback_and_migrate_to_move_exactly_as_far_as_asked,
                refresh_reverts_everything_then_reapplies_it_in_one_batch,
                a_refused_plan_changes_nothing,
                a_changed_file_is_refused_until_its_checksum_is_accepted,
                fresh_drops_what_is_not_ours_and_reapplies_everything,
                a_failed_migration_keeps_what_ran_before_and_records_what_the_database_kept,
                baseline_records_without_running_and_migrate_goes_on_after_it,
                a_history_table_of_another_name_keeps_a_history_of_its_own,
                every_command_names_its_lock_and_leaves_it_free,
            ]);
        )*
    };
    (@row $row:ident, $target:expr, [$($check:ident),* $(,)?]) => {
        mod $row {
            use super::*;
            $(
                #[tokio::test]
                async fn $check() {
                    if let Some(target) = $target.await {
                        super::checks::$check(&target).await;
                    }
                }
            )*
        }
    };
}

pub(crate) use conformance_tests;
