//! `rollback` / `down`, and `to V` (which moves both ways).

use crate::support::project::Project;
use crate::{st, states, steps, three, two_batches, user_tables, DB};

#[test]
fn rollback_reverses_only_the_last_batch_by_default() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback"]);
    run.success().stdout_has("Reverted 1.");
    assert_eq!(steps(&run.stdout, "reverted"), st(&[(3, "create_c")]));
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );
    assert_eq!(user_tables(&p), ["a", "b"]);

    let run = p.unlocked(DB, &["rollback"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(2, "create_b"), (1, "create_a")]),
        "newest first"
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn rollback_steps_n_reverses_the_n_newest_across_batches() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback", "--steps", "2"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "pending"), (3, "pending")])
    );
    assert_eq!(user_tables(&p), ["a"]);
}

#[test]
fn rollback_to_v_reverses_everything_applied_after_v() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback", "--to", "1"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "pending"), (3, "pending")])
    );
}

#[test]
fn rollback_to_0_reverses_everything() {
    let p = Project::new();
    two_batches(&p);
    p.unlocked(DB, &["rollback", "--to", "0"]).success();
    assert_eq!(
        states(&p),
        st(&[(1, "pending"), (2, "pending"), (3, "pending")])
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn rollback_to_an_unknown_version_is_refused_and_changes_nothing() {
    let p = Project::new();
    two_batches(&p);
    p.unlocked(DB, &["rollback", "--to", "7"])
        .error("UNKNOWN_VERSION")
        .stderr_has("7");
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "applied")])
    );
}

#[test]
fn rollback_all_reverses_every_applied_migration_newest_first() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback", "--all"]);
    run.success().stdout_has("Reverted 3.");
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b"), (1, "create_a")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "pending"), (2, "pending"), (3, "pending")])
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn rollback_with_nothing_applied_succeeds_and_says_so() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["rollback"])
        .success()
        .stdout_has("Nothing to roll back.");
    p.unlocked(DB, &["down"]).success();
}

#[test]
fn rollback_scope_flags_are_validated_by_the_command_line() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["rollback", "--steps", "0"]).code(2);
    p.unlocked(DB, &["rollback", "--steps", "x"]).code(2);
    p.unlocked(DB, &["rollback", "--steps", "1", "--all"])
        .code(2);
    p.unlocked(DB, &["rollback", "--to", "1", "--all"]).code(2);
    assert!(!p.exists(DB));
}

#[test]
fn down_reverses_exactly_the_most_recently_applied_migration() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(DB, &["down"]);
    run.success();
    assert_eq!(steps(&run.stdout, "reverted"), st(&[(3, "create_c")]));
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );
    assert_eq!(user_tables(&p), ["a", "b"]);
}

#[test]
fn rolling_back_an_irreversible_migration_is_refused_before_anything_changes() {
    let p = Project::new();
    p.irreversible(1, "create_a", "CREATE TABLE a (id INT);\n");
    p.table_migration(2, "create_b", "b");
    p.unlocked(DB, &["migrate"]).success();
    // --all would revert 2 first, then hit 1: the plan is refused as a whole.
    p.unlocked(DB, &["rollback", "--all"])
        .error("IRREVERSIBLE_MIGRATION")
        .stderr_has("create_a");
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "applied")]));
    assert_eq!(user_tables(&p), ["a", "b"]);
    // Reverting only the reversible one works.
    p.unlocked(DB, &["down"]).success();
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "pending")]));
}

// ---------------------------------------------------------------------------------------------
// to V
// ---------------------------------------------------------------------------------------------

#[test]
fn to_v_moves_up_through_v_and_down_until_v_is_the_newest() {
    let p = Project::new();
    three(&p);
    let run = p.unlocked(DB, &["to", "2"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "applied"),
        st(&[(1, "create_a"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );

    p.unlocked(DB, &["to", "3"]).success();
    assert_eq!(user_tables(&p), ["a", "b", "c"]);

    let run = p.unlocked(DB, &["to", "1"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "pending"), (3, "pending")])
    );

    // Already there: nothing to do, still success.
    p.unlocked(DB, &["to", "1"])
        .success()
        .stdout_has("Nothing to migrate");
}

#[test]
fn to_0_reverses_everything() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(DB, &["to", "0"]);
    run.success();
    assert_eq!(steps(&run.stdout, "reverted").len(), 3);
    assert_eq!(
        states(&p),
        st(&[(1, "pending"), (2, "pending"), (3, "pending")])
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn to_an_unknown_version_is_refused_and_changes_nothing() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["to", "7"])
        .error("UNKNOWN_VERSION")
        .stderr_has("7");
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "applied")])
    );
    p.unlocked(DB, &["to", "abc"]).code(2);
}
