//! A step's attempts: each statement waits for its table (or metadata) lock at most
//! `table_lock_timeout`, gives way to the application's queries queued behind it, and the
//! step is tried again with jittered backoff until `table_lock_retry_for` runs out — when the
//! database provably undid the attempt. What to retry and when to stop is decided by the pure
//! rules of `plan/retry.rs`; this loop only runs them.
//!
//! While it pauses, the loop watches the session that held the lock (named while the
//! attempt waited): once its transaction has ended, the step is tried again at once, waiting
//! at most what keeps the application blocked under a quarter of the time. Between attempts
//! the migration lock is confirmed again, and a shutdown signal stops the run with the step
//! not applied.

use std::time::Duration;

// tokio's clock, which a test can pause and advance: the budget and the pauses are times.
use tokio::time::Instant;

use super::bracket::Bracket;
use super::session::Session;
use super::step::{Attempt, Prepared};
use crate::backoff::Backoff;
use crate::error::Code;
use crate::events::{EventKind, Warning};
use crate::kind::Capabilities;
use crate::lock::LockCheck;
use crate::migration::{Direction, Migration};
use crate::plan::retry::{self, Giving, Next, Retried, SoFar, StepShape};
use crate::source::sql::{has_keyword, split_statements};
use dirthara_core::config::{Origin, TABLE_LOCK_TIMEOUT};

/// The first pause after an attempt that gave way, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const LONGEST_PAUSE: Duration = Duration::from_secs(15);
/// How often a pause asks whether the session that held the lock is done with it.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// How a pause between attempts ended.
enum Paused {
    /// It ran its course.
    Over,
    /// The session that held the lock ended its transaction, this long before the end.
    BlockerGone { left: Duration },
    /// A shutdown signal came.
    Stopped,
}

impl Session<'_> {
    /// Runs `prepared` until an attempt does not give way to the application's locks, the
    /// retry budget runs out, or the run is stopped.
    pub(super) async fn attempts(&mut self, prepared: &Prepared<'_>, check: LockCheck) -> Attempt {
        let giving = self.giving(prepared).await;
        let timeout = match giving {
            Giving::After { timeout, .. } => Some(timeout),
            Giving::Waits { .. } => None,
        };
        let budget = self.migrator.config.table_lock_retry_for;
        let started = Instant::now();
        let mut backoff = Backoff::new(FIRST_PAUSE, LONGEST_PAUSE);
        let (mut made, mut blocked, mut resume_at) = (0u32, Duration::ZERO, 0usize);
        // This attempt's timeout: the configured one, or less for an attempt made early.
        let mut this_timeout = timeout;
        // Each of the step's table locks waits its share: their waits add up to the timeout.
        let locks = (self.step_locks)
            .get(&(prepared.migration.version, prepared.direction))
            .copied()
            .unwrap_or(1);
        let unit = match locks {
            1 => Duration::ZERO,
            _ => self.lock_wait_unit(prepared).await,
        };
        loop {
            made = made.saturating_add(1);
            let began = Instant::now();
            let per_lock = this_timeout.map(|timeout| match locks {
                1 => timeout,
                _ => retry::per_lock(timeout, locks, unit),
            });
            let attempt = self.attempt(prepared, check, per_lock, resume_at).await;
            let Attempt::Failed(failure) = attempt else {
                return attempt;
            };
            let (Giving::After { timeout, retried }, true) = (
                giving,
                failure.error.lock_not_available || failure.error.deadlock_victim,
            ) else {
                return Attempt::Failed(failure);
            };
            blocked = blocked.saturating_add(began.elapsed());
            let undone = match retried {
                Retried::Whole => failure.nothing_changed,
                // The statement that gave way was undone; those before it may have committed.
                Retried::FromStatement => failure.nothing_changed || failure.statement.is_some(),
                Retried::Never(_) => false,
            };
            if !undone {
                return Attempt::Failed(failure);
            }
            let so_far = SoFar {
                elapsed: started.elapsed(),
                blocked,
            };
            let after = match retry::next(
                timeout,
                budget,
                so_far,
                backoff.next_pause(),
                fastrand::f64(),
            ) {
                Next::GiveUp => {
                    return Attempt::GaveUp {
                        failure,
                        attempts: made,
                        spent: started.elapsed(),
                    }
                }
                Next::Retry { after } => after,
            };
            let waited = per_lock.unwrap_or(timeout);
            let requested = requested_timeout(
                self.migrator.config.table_lock_timeout,
                prepared.migration,
                prepared.direction,
            );
            let gave_way = EventKind::TableLockTimeout {
                version: prepared.migration.version,
                name: prepared.migration.name.clone(),
                direction: prepared.direction,
                attempt: made,
                waited,
                // Said where the database could not bound the wait as asked (MySQL's whole
                // seconds), for an attempt that waited its full timeout.
                rounded_from: requested.filter(|&r| r != waited && waited == timeout),
                table: failure.error.table.clone(),
                blocker: failure.error.blocker.clone(),
                deadlock: failure.error.deadlock_victim,
                retry_in: after,
                budget_left: budget.saturating_sub(so_far.elapsed),
            };
            if let Some(message) = gave_way.gave_way_message() {
                (self.gave_way).push(Warning::new(Code::TableLockTimeout, message));
            }
            self.migrator.events.emit(gave_way);
            let blocker = failure.error.blocker.as_ref();
            this_timeout = Some(timeout);
            match self.pause_watching(prepared, after, blocker).await {
                Paused::Over => {}
                Paused::Stopped => return Attempt::Stopped(failure),
                Paused::BlockerGone { left } => {
                    let so_far = SoFar {
                        elapsed: started.elapsed(),
                        blocked,
                    };
                    let unit = self.lock_wait_unit(prepared).await;
                    let wait = retry::early(timeout, so_far, unit);
                    this_timeout = Some(wait);
                    self.migrator.events.emit(EventKind::TableLockFreed {
                        version: prepared.migration.version,
                        name: prepared.migration.name.clone(),
                        direction: prepared.direction,
                        blocker: blocker.cloned(),
                        pause_left: left,
                        wait,
                    });
                }
            }
            if let Err(lost) = self.ensure_lock(Some(prepared.migration)).await {
                return Attempt::LockLost(failure, lost);
            }
            // A transaction rolled back whole starts again; else at the statement that gave way.
            resume_at = match failure.nothing_changed {
                true => 0,
                false => failure.statement.unwrap_or(0),
            };
        }
    }

    /// Pauses `after` before the next attempt of `prepared`, asking every [`WATCH_EVERY`]
    /// whether `blocker` (if it was named) is done with the lock.
    async fn pause_watching(
        &mut self,
        prepared: &Prepared<'_>,
        after: Duration,
        blocker: Option<&crate::events::Blocker>,
    ) -> Paused {
        let until = Instant::now() + after;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Paused::Over;
            }
            let nap = match blocker {
                Some(_) => left.min(WATCH_EVERY),
                None => left,
            };
            if !pause(self.migrator.shutdown.clone(), nap).await {
                return Paused::Stopped;
            }
            let (Some(blocker), false) = (blocker, Instant::now() >= until) else {
                continue;
            };
            let gone = match self.step_connection(prepared).await {
                Ok(target) => target.blocker_gone(blocker).await,
                Err(_) => None,
            };
            if gone == Some(true) {
                let left = until.saturating_duration_since(Instant::now());
                return Paused::BlockerGone { left };
            }
        }
    }

    /// What the table-lock timeout of `prepared`'s connection is counted in.
    async fn lock_wait_unit(&mut self, prepared: &Prepared<'_>) -> Duration {
        match self.step_connection(prepared).await {
            Ok(target) => target.capabilities().lock_wait_unit,
            Err(_) => Duration::from_secs(1),
        }
    }

    /// How `prepared` gives way, on the connection it runs on.
    pub(super) async fn giving(&mut self, prepared: &Prepared<'_>) -> Giving {
        let Ok(target) = self.step_connection(prepared).await else {
            return Giving::Waits { why: None };
        };
        let capabilities = target.capabilities();
        giving_of(
            self.migrator.config.table_lock_timeout,
            prepared.migration,
            prepared.direction,
            prepared.bracket,
            prepared.transactional,
            &capabilities,
        )
    }
}

/// The table-lock timeout a step asks for: its own `-- dirthara:table-lock-timeout`, else
/// `configured`; `None`: none.
pub(super) fn requested_timeout(
    configured: Option<Duration>,
    migration: &Migration,
    direction: Direction,
) -> Option<Duration> {
    // Checked at load by the same parser, so only a well-formed value reaches here.
    let directive = (migration.table_lock_timeout_in(direction))
        .and_then(|text| TABLE_LOCK_TIMEOUT.read(text, Origin::Named("")).ok());
    directive.unwrap_or(configured)
}

/// How a step gives way: under its [`requested_timeout`] as its database applies it, on a
/// database that can do what `capabilities` say (whether it has table locks, whether its DDL
/// is transactional, the dialect its steps are read in, the unit it bounds lock waits in).
/// The run asks it of the step's connection, `preview` of the connection's kind.
pub(super) fn giving_of(
    configured: Option<Duration>,
    migration: &Migration,
    direction: Direction,
    bracket: Bracket,
    transactional: bool,
    capabilities: &Capabilities,
) -> Giving {
    let &Capabilities {
        table_locks,
        transactional_ddl,
        sql_dialect: dialect,
        lock_wait_unit,
        ..
    } = capabilities;
    let timeout = requested_timeout(configured, migration, direction)
        .map(|timeout| retry::as_applied(timeout, lock_wait_unit));
    let text = migration.step(direction).unwrap_or_default();
    let shape = StepShape {
        has_table_locks: table_locks && bracket != Bracket::RecordOnly,
        in_one_transaction: bracket == Bracket::Atomic || (transactional && transactional_ddl),
        own_transaction: migration.own_transaction_in(direction).is_some(),
        commits_each_statement: !transactional_ddl,
        statements: dialect.map_or(1, |dialect| split_statements(text, dialect).len()),
        // Read by the tokenizer: a comment or a string that says CONCURRENTLY builds nothing.
        concurrently: dialect.is_some_and(|dialect| has_keyword(text, dialect, "CONCURRENTLY")),
    };
    retry::giving(timeout, shape)
}

/// Waits `after` before the next attempt; `false` when a shutdown signal came first.
async fn pause(shutdown: Option<tokio::sync::watch::Receiver<bool>>, after: Duration) -> bool {
    let Some(mut signal) = shutdown else {
        tokio::time::sleep(after).await;
        return true;
    };
    if *signal.borrow() {
        return false;
    }
    let stopped = async move {
        // A dropped sender never signals.
        if signal.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = tokio::time::sleep(after) => true,
        () = stopped => false,
    }
}
