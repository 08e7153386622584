//! The one wait loop, for both strategies: try, and between tries report the holder (every
//! `HOLDER_REPORT_INTERVAL`) and pause the way the primitive pauses best.
//!
//! A wait ends by its deadline (a pause is given no more than the time left), so once this
//! returns `MIGRATION_LOCK_HELD` no attempt is left in flight. A shutdown signal cuts a pause
//! short; an attempt it abandons is the backend's to cancel when the connection is closed.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;

use super::LOCK_NAME;
use crate::config::LockWait;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{EventKind, EventSink, LockHolder};

/// How often a waiting runner says again who holds the lock.
const HOLDER_REPORT_INTERVAL: Duration = Duration::from_secs(10);

/// One way of contending for the lock.
#[async_trait]
pub trait Contender: Send {
    /// One attempt; `Ok(false)` when someone else holds the lock.
    async fn try_take(&mut self) -> Result<bool>;
    /// Who holds the lock, for the waiting report and the final `MIGRATION_LOCK_HELD`.
    async fn holder(&mut self) -> Result<Option<LockHolder>>;
    /// Waits before the next attempt: at most `remaining` when the wait is bounded.
    async fn pause(&mut self, remaining: Option<Duration>) -> Result<()>;
}

/// Who is waiting, for how long, and what may stop the wait.
pub struct Waiting<'a> {
    pub connection: &'a str,
    pub wait: LockWait,
    pub events: &'a EventSink,
    pub shutdown: Option<&'a watch::Receiver<bool>>,
    /// The command, written into a lease as its holder's operation.
    pub operation: &'a str,
    /// How long a lease lasts unless renewed.
    pub lease_ttl: Duration,
}

pub async fn contend(contender: &mut dyn Contender, waiting: &Waiting<'_>) -> Result<()> {
    let started = Instant::now();
    let deadline = match waiting.wait {
        LockWait::Forever => None,
        // `checked_add`: a wait too long for the clock (only code that skips
        // `Config::validate` can ask for one) has no deadline rather than a panic.
        LockWait::For(limit) => started.checked_add(limit),
    };
    let mut next_report = started;
    loop {
        if contender.try_take().await? {
            waiting.events.emit(EventKind::LockAcquired {
                lock: LOCK_NAME.to_string(),
                connection: waiting.connection.to_string(),
                waited: started.elapsed(),
            });
            return Ok(());
        }
        if waiting.shutdown.is_some_and(|rx| *rx.borrow()) {
            return Err(interrupted_while_waiting(started.elapsed()));
        }
        let now = Instant::now();
        let remaining = deadline.map(|d| d.saturating_duration_since(now));
        if remaining == Some(Duration::ZERO) {
            // Who holds it is for the message only: a failed lookup does not change the answer.
            let holder = contender.holder().await.ok().flatten();
            let held = Error::new(ErrorKind::LockHeld {
                lock: LOCK_NAME.to_string(),
                connection: waiting.connection.to_string(),
                holder,
            });
            return Err(after_wait(held, waiting.wait, started.elapsed()));
        }
        if now >= next_report {
            let holder = contender.holder().await.ok().flatten();
            waiting.events.emit(EventKind::LockWaiting {
                lock: LOCK_NAME.to_string(),
                connection: waiting.connection.to_string(),
                holder,
                waited: now - started,
            });
            next_report = now + HOLDER_REPORT_INTERVAL;
        }
        match waiting.shutdown {
            Some(rx) => {
                // A clone has seen what `rx` has seen, so a signal sent since it was last
                // read wakes this at once.
                let mut signal = rx.clone();
                tokio::select! {
                    paused = contender.pause(remaining) => paused?,
                    _ = signal.wait_for(|stop| *stop) => {
                        return Err(interrupted_while_waiting(started.elapsed()));
                    }
                }
            }
            None => contender.pause(remaining).await?,
        }
    }
}

/// `INTERRUPTED` by a signal that came while waiting for the lock: nothing had started.
fn interrupted_while_waiting(waited: Duration) -> Error {
    Error::new(ErrorKind::Interrupted {
        remaining: Vec::new(),
    })
    .after_waiting(waited)
}

/// `held` after the wait ran out: says how long we waited when a wait was asked for, so
/// the advice is not to wait again (a zero wait is no wait; its advice is to wait).
fn after_wait(held: Error, wait: LockWait, waited: Duration) -> Error {
    match wait {
        LockWait::For(limit) if limit.is_zero() => held,
        _ => held.after_waiting(waited),
    }
}
