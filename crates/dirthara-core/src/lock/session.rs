//! The session lock's primitive, as a database that has one supplies it.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::events::LockHolder;

/// A named lock held by one connection's session, scoped to that connection's database (or
/// schema) and history table, both fixed when the connection opened.
///
/// Contract: `try_lock` never blocks on the database for long (waiting is the lock module's
/// job, in [`SessionLock::wait_for_release`], so a waiter never sits inside a lock statement
/// holding a snapshot); the lock is released by `unlock` or when the session ends.
#[async_trait]
pub trait SessionLock: Send {
    /// Takes the lock if it is free; `Ok(false)` when someone else holds it.
    async fn try_lock(&mut self) -> Result<bool>;
    /// Whether this session still holds the lock.
    async fn holds_lock(&mut self) -> Result<bool>;
    /// Releases the lock and wakes waiters.
    async fn unlock(&mut self) -> Result<()>;
    /// Who holds the lock now (`None`: nobody).
    async fn holder(&mut self) -> Result<Option<LockHolder>>;
    /// Returns when the lock may have been released, or after `max` at the latest.
    async fn wait_for_release(&mut self, max: Duration) -> Result<()> {
        tokio::time::sleep(crate::backoff::jittered(
            max.min(Duration::from_millis(100)),
        ))
        .await;
        Ok(())
    }
    /// The wait is over (the lock taken, or given up): closes whatever
    /// [`SessionLock::wait_for_release`] opened, cleanly.
    async fn stop_waiting(&mut self) {}
    /// Ends the holder's session(s); returns a description of each one ended.
    async fn force_unlock(&mut self) -> Result<Vec<String>>;

    /// True when a step run atomically with its record can carry the lock check itself: sent
    /// with `checks_lock`, it fails, rolled back, if this session no longer holds the lock —
    /// so no separate check is needed before it. The lock then tells a lost lock from a
    /// failed step by asking [`SessionLock::holds_lock`] after a failure.
    fn verifies_in_step(&self) -> bool {
        false
    }

    /// True when the `running` marker written before a step can carry the lock check:
    /// written with the backend's `record_guarded`, the
    /// marker is written only if this session holds the lock, asked in the same message, so
    /// no separate check is needed before a step bracketed by one (a round trip less per
    /// migration on a database whose DDL cannot share a transaction with its record).
    fn verifies_in_marker(&self) -> bool {
        false
    }
}
