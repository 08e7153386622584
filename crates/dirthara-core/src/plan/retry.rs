//! Giving way to the application's locks: which steps may be tried again after a statement
//! timed out waiting for its table lock, how long to pause first, and when to give up. Pure
//! functions of what happened so far, tested without a database, like the planner.
//!
//! The rules:
//! - only an attempt the database provably undid is tried again: a step that ran in one
//!   transaction is rolled back whole and re-run from its start; on a database whose DDL
//!   commits at once (MySQL), the statement that gave way is re-run and the ones before it,
//!   committed, are not;
//! - never a step whose undoing is not certain: one that manages its own transaction, or
//!   several statements outside a transaction (elsewhere than MySQL);
//! - an index built `CONCURRENTLY` is exempt from the timeout: it does not block the
//!   application's queries, and a build cut short leaves an `INVALID` index behind;
//! - the application is blocked at most one timeout at a time, and at most a quarter of the
//!   time overall: the pause before an attempt is at least what keeps the share of time
//!   spent waiting under a quarter once that attempt waited its whole timeout too;
//! - a pause is cut short when the session that held the lock is seen to be done: the
//!   attempt made then waits only as long as still keeps the share under a quarter, should
//!   another session hold the lock by now.
//!
//! Why the pause is not simply capped near the backoff step: the pauses of a schedule that
//! cannot see the blocker must add up to three timeouts per attempt that gave way (each
//! blocked the application for one). After the first attempt (timeout t), a blocker that
//! ends just after it leaves a run of t plus the pause p, blocked for t: a quarter needs
//! p >= 3t (6 s for 2 s), while finishing within one backoff step (0.5 s) plus 1 s of the
//! blocker's end needs p <= 1.5 s. Only watching the blocker reconciles the two.

use std::time::Duration;

/// How a step gives way, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Giving {
    /// No timeout: its statements wait for their locks as long as it takes. `why` says
    /// why, when not by configuration.
    Waits { why: Option<&'static str> },
    /// Each statement waits at most `timeout`; the step is then tried again as `retried`.
    After { timeout: Duration, retried: Retried },
}

/// What is tried again after an attempt gave way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retried {
    /// The whole step: it ran in one transaction, rolled back.
    Whole,
    /// The statement that gave way, and those after it: the ones before committed.
    FromStatement,
    /// Nothing: its error names the blocker instead.
    Never(&'static str),
}

/// What a step is, as far as giving way goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepShape {
    /// The database has table (or metadata) locks that queue the application (PostgreSQL,
    /// MySQL/MariaDB).
    pub has_table_locks: bool,
    /// It runs in one transaction that a failure rolls back whole.
    pub in_one_transaction: bool,
    /// It manages its own transaction (`BEGIN`/`COMMIT` in the file).
    pub own_transaction: bool,
    /// DDL commits at once on its database (MySQL): it runs statement by statement.
    pub commits_each_statement: bool,
    /// How many statements it has.
    pub statements: usize,
    /// It builds or drops an index `CONCURRENTLY`.
    pub concurrently: bool,
}

/// How a step of `shape` gives way under `timeout` (`None`: no timeout configured).
pub fn giving(timeout: Option<Duration>, shape: StepShape) -> Giving {
    let Some(timeout) = timeout else {
        return Giving::Waits { why: None };
    };
    if !shape.has_table_locks {
        return Giving::Waits {
            why: Some("this database has no table locks that queue the application"),
        };
    }
    if shape.concurrently {
        return Giving::Waits {
            why: Some(
                "a CONCURRENTLY index build does not block the application's queries, and one \
                 cut short would leave an INVALID index behind",
            ),
        };
    }
    let retried = if shape.own_transaction {
        Retried::Never("it manages its own transaction")
    } else if shape.in_one_transaction {
        Retried::Whole
    } else if shape.commits_each_statement {
        Retried::FromStatement
    } else if shape.statements <= 1 {
        Retried::Whole
    } else {
        Retried::Never("several statements outside a transaction may have committed")
    };
    Giving::After { timeout, retried }
}

/// `timeout` as a database that bounds lock waits in whole `unit`s applies it: rounded up
/// (MySQL's `lock_wait_timeout` counts seconds, so 500 ms is 1 s there). A zero unit bounds
/// waits exactly.
pub fn as_applied(timeout: Duration, unit: Duration) -> Duration {
    if unit.is_zero() {
        return timeout;
    }
    let units = timeout.as_nanos().div_ceil(unit.as_nanos()).max(1);
    let nanos = units.saturating_mul(unit.as_nanos());
    Duration::new(
        u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX),
        (nanos % 1_000_000_000) as u32,
    )
}

/// What each of a step's `locks` table locks may wait, so that their waits add up to at
/// most `timeout`: PostgreSQL bounds each lock on its own, and a step holding its first lock
/// while it waits for the next keeps the application waiting for both. Never under the
/// shortest wait a database bounds (1 ms: PostgreSQL's 0 means no bound at all), and rounded
/// up to `unit` where the database counts coarser (MySQL's whole seconds: there the sum may
/// exceed `timeout`, and a step's DDL commits, releasing its locks, statement by statement).
pub fn per_lock(timeout: Duration, locks: u32, unit: Duration) -> Duration {
    let share = (timeout / locks.max(1)).max(Duration::from_millis(1));
    as_applied(share, unit)
}

/// The attempts made so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SoFar {
    /// Since the first attempt began.
    pub elapsed: Duration,
    /// Of which the attempts that gave way spent waiting (each about one timeout).
    pub blocked: Duration,
}

/// What to do after an attempt gave way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Pause, then try again.
    Retry { after: Duration },
    /// The budget is spent: fail with `TABLE_LOCK_TIMEOUT`.
    GiveUp,
}

/// After an attempt gave way: pause `backoff` (the next jittered exponential pause), or
/// longer where the quarter rule needs it, unless that would run past `budget`. `spread`, a
/// random fraction in `0..1`, lengthens a pause the quarter decides by up to a tenth: the
/// quarter alone would send runners that gave way together back together.
pub fn next(
    timeout: Duration,
    budget: Duration,
    so_far: SoFar,
    backoff: Duration,
    spread: f64,
) -> Next {
    // After a pause p and one more attempt blocked for a whole timeout t, the share of time
    // spent blocking is (blocked + t) / (elapsed + p + t); it stays at most a quarter when
    // p >= 4 (blocked + t) - (elapsed + t).
    let quarter = (so_far.blocked.saturating_add(timeout))
        .saturating_mul(4)
        .saturating_sub(so_far.elapsed.saturating_add(timeout));
    let after = match quarter > backoff {
        true => quarter.saturating_add(quarter.mul_f64(spread.clamp(0.0, 1.0) / 10.0)),
        false => backoff,
    };
    if so_far.elapsed.saturating_add(after) >= budget {
        return Next::GiveUp;
    }
    Next::Retry { after }
}

/// An attempt made before its pause is over, because the session that held the lock is
/// done: the longest it may wait for its lock. At most `timeout`, and no longer than keeps
/// the application blocked under a quarter of the time should it wait that long, rounded
/// down to what the database can bound (`unit`: MySQL counts whole seconds). Zero: it may
/// not wait at all (MariaDB `lock_wait_timeout = 0`; PostgreSQL's shortest, 1 ms).
pub fn early(timeout: Duration, so_far: SoFar, unit: Duration) -> Duration {
    // (blocked + w) / (elapsed + w) <= 1/4  <=>  w <= (elapsed - 4 blocked) / 3
    let room = (so_far
        .elapsed
        .saturating_sub(so_far.blocked.saturating_mul(4))
        / 3)
    .min(timeout);
    if unit.is_zero() {
        return room;
    }
    let whole = room.as_nanos() / unit.as_nanos() * unit.as_nanos();
    Duration::from_nanos(u64::try_from(whole).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_steps_locks_share_its_timeout() {
        let ms = Duration::from_millis;
        assert_eq!(per_lock(2 * SECOND, 1, ms(1)), 2 * SECOND);
        assert_eq!(per_lock(2 * SECOND, 4, ms(1)), ms(500));
        assert_eq!(per_lock(2 * SECOND, 3, ms(1)), ms(667));
        assert!(3 * per_lock(2 * SECOND, 3, Duration::ZERO) <= 2 * SECOND);
        // Never no bound at all, and MySQL's whole seconds.
        assert_eq!(per_lock(ms(5), 100, ms(1)), ms(1));
        assert_eq!(per_lock(2 * SECOND, 3, SECOND), SECOND);
    }

    fn shape() -> StepShape {
        StepShape {
            has_table_locks: true,
            in_one_transaction: true,
            own_transaction: false,
            commits_each_statement: false,
            statements: 3,
            concurrently: false,
        }
    }

    #[test]
    fn only_what_the_database_undid_is_tried_again() {
        let t = Some(2 * SECOND);
        let after = |retried| Giving::After {
            timeout: 2 * SECOND,
            retried,
        };
        assert_eq!(giving(t, shape()), after(Retried::Whole));
        let mysql = StepShape {
            in_one_transaction: false,
            commits_each_statement: true,
            ..shape()
        };
        assert_eq!(giving(t, mysql), after(Retried::FromStatement));
        let loose = StepShape {
            in_one_transaction: false,
            ..shape()
        };
        assert!(matches!(
            giving(t, loose),
            Giving::After {
                retried: Retried::Never(_),
                ..
            }
        ));
        let single = StepShape {
            statements: 1,
            ..loose
        };
        assert_eq!(giving(t, single), after(Retried::Whole));
        let own = StepShape {
            own_transaction: true,
            ..shape()
        };
        assert!(matches!(
            giving(t, own),
            Giving::After {
                retried: Retried::Never(_),
                ..
            }
        ));
    }

    #[test]
    fn concurrently_and_databases_without_table_locks_wait_and_off_is_off() {
        let t = Some(2 * SECOND);
        let concurrently = StepShape {
            concurrently: true,
            ..shape()
        };
        assert!(matches!(
            giving(t, concurrently),
            Giving::Waits { why: Some(_) }
        ));
        let sqlite = StepShape {
            has_table_locks: false,
            ..shape()
        };
        assert!(matches!(giving(t, sqlite), Giving::Waits { why: Some(_) }));
        assert_eq!(giving(None, shape()), Giving::Waits { why: None });
    }

    #[test]
    fn a_timeout_is_rounded_up_to_what_the_database_can_bound() {
        let ms = Duration::from_millis;
        assert_eq!(as_applied(ms(500), SECOND), SECOND);
        assert_eq!(as_applied(ms(2_000), SECOND), 2 * SECOND);
        assert_eq!(as_applied(ms(2_001), SECOND), 3 * SECOND);
        assert_eq!(as_applied(ms(1), ms(1)), ms(1));
        assert_eq!(as_applied(Duration::from_micros(1_500), ms(1)), ms(2));
        assert_eq!(as_applied(ms(1_234), Duration::ZERO), ms(1_234));
        // The longest bounded wait (30 days) is far from any overflow.
        as_applied(Duration::MAX, SECOND);
    }

    #[test]
    fn a_zero_budget_makes_one_attempt() {
        let after_one = SoFar {
            elapsed: 2 * SECOND,
            blocked: 2 * SECOND,
        };
        assert_eq!(
            next(2 * SECOND, Duration::ZERO, after_one, SECOND / 2, 0.5),
            Next::GiveUp
        );
    }

    #[test]
    fn the_application_is_never_blocked_more_than_a_quarter_of_the_time() {
        let timeout = 2 * SECOND;
        let mut so_far = SoFar::default();
        let mut backoff = SECOND / 2;
        for round in 0..50 {
            let spread = f64::from(round % 7) / 7.0;
            // The attempt waits its whole timeout and gives way.
            so_far.elapsed += timeout;
            so_far.blocked += timeout;
            match next(timeout, 3600 * SECOND, so_far, backoff, spread) {
                Next::Retry { after } => {
                    assert!(after >= backoff);
                    // The quarter decides the first pause: six timeouts, spread by a tenth.
                    if round == 0 {
                        assert!(after >= 12 * SECOND && after <= 12 * SECOND * 11 / 10);
                    }
                    so_far.elapsed += after;
                    // One more whole timeout after the pause keeps it within a quarter.
                    let share = (so_far.blocked + timeout).as_secs_f64()
                        / (so_far.elapsed + timeout).as_secs_f64();
                    assert!(share <= 0.25 + 1e-9, "{share} after {so_far:?}");
                }
                Next::GiveUp => panic!("gave up within the budget"),
            }
            backoff = (backoff * 2).min(15 * SECOND);
        }
    }

    #[test]
    fn a_pause_the_quarter_decides_is_spread_but_a_backoff_pause_is_not() {
        let after_one = SoFar {
            elapsed: 2 * SECOND,
            blocked: 2 * SECOND,
        };
        let pause =
            |backoff, spread| match next(2 * SECOND, 600 * SECOND, after_one, backoff, spread) {
                Next::Retry { after } => after,
                Next::GiveUp => panic!("gave up within the budget"),
            };
        assert_eq!(pause(SECOND / 2, 0.0), 12 * SECOND);
        assert_eq!(pause(SECOND / 2, 0.5), 12 * SECOND + 600 * SECOND / 1000);
        // Longer than the quarter needs: the backoff's own (already jittered) pause stands.
        assert_eq!(pause(20 * SECOND, 0.9), 20 * SECOND);
    }

    #[test]
    fn the_budget_ends_the_retries() {
        let so_far = SoFar {
            elapsed: 9 * SECOND,
            blocked: 2 * SECOND,
        };
        assert_eq!(
            next(SECOND, 10 * SECOND, so_far, 2 * SECOND, 0.5),
            Next::GiveUp
        );
        assert!(matches!(
            next(SECOND, 30 * SECOND, so_far, 2 * SECOND, 0.5),
            Next::Retry { .. }
        ));
    }

    #[test]
    fn an_early_attempt_waits_only_what_keeps_the_quarter() {
        let ms = Duration::from_millis;
        // Blocked 2 s of 9.6 s: waiting 530 ms more is 2.53 of 10.13 s, a quarter.
        let so_far = SoFar {
            elapsed: ms(9_600),
            blocked: 2 * SECOND,
        };
        let wait = early(2 * SECOND, so_far, ms(1));
        assert_eq!(wait, ms(533));
        let share = (so_far.blocked + wait).as_secs_f64() / (so_far.elapsed + wait).as_secs_f64();
        assert!(share <= 0.25, "{share}");
        // Whole seconds (MySQL) round down, to no wait at all.
        assert_eq!(early(2 * SECOND, so_far, SECOND), Duration::ZERO);
        // Never longer than the timeout, and nothing before the blocked time is paid back.
        let long = SoFar {
            elapsed: 3600 * SECOND,
            blocked: 2 * SECOND,
        };
        assert_eq!(early(2 * SECOND, long, ms(1)), 2 * SECOND);
        let soon = SoFar {
            elapsed: 3 * SECOND,
            blocked: 2 * SECOND,
        };
        assert_eq!(early(2 * SECOND, soon, ms(1)), Duration::ZERO);
        assert_eq!(early(2 * SECOND, long, Duration::ZERO), 2 * SECOND);
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let so_far = SoFar {
            elapsed: Duration::MAX,
            blocked: Duration::MAX,
        };
        assert_eq!(
            next(Duration::MAX, Duration::MAX, so_far, Duration::MAX, 1.0),
            Next::GiveUp
        );
        let room = SoFar {
            elapsed: Duration::MAX,
            blocked: Duration::ZERO,
        };
        early(Duration::MAX, room, Duration::from_millis(1));
        early(Duration::MAX, room, Duration::MAX);
    }
}
