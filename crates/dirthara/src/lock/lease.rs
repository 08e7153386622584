//! The lease lock: one row/document with a fixed id and an expiry, for databases (or
//! poolers) where a session lock cannot be trusted.
//!
//! The algorithm lives here once; a [`LeaseStore`] only says how to run its four atomic
//! operations against a table or collection. The rules:
//! - acquiring is ONE atomic operation that succeeds when no lease exists or the existing
//!   one's expiry is a valid time earlier than the store's clock; staleness is decided afresh
//!   at every attempt, never cached;
//! - a lease whose expiry is missing or not a time counts as held, by acquire and by status;
//! - renewing and releasing match our owner id, so a runner whose lease lapsed can never
//!   extend or delete the next holder's lease;
//! - "now" is the store's clock wherever it has one, so client clock skew cannot steal a live
//!   lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;
use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;

use super::{after_wait, interrupted_while_waiting, LOCK_NAME};
use crate::backend::jittered;
use crate::config::LockWait;
use crate::error::{Code, Error, ErrorKind, Result};
use crate::events::{Event, EventSink, LockHolder, Warning};

/// What a runner writes into the lease when it takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    /// Fresh and random for every run.
    pub owner_id: String,
    pub hostname: String,
    pub pid: u32,
    pub operation: String,
    pub ttl: Duration,
}

impl LeaseRequest {
    pub fn new(operation: &str, ttl: Duration) -> Self {
        LeaseRequest {
            owner_id: format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)),
            hostname: crate::hostname(),
            pid: std::process::id(),
            operation: operation.to_string(),
            ttl,
        }
    }
}

/// The lease as it is stored, read back for status and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct LeaseRecord {
    pub owner_id: Option<String>,
    pub hostname: Option<String>,
    pub pid: Option<i64>,
    pub operation: Option<String>,
    /// UTC, RFC 3339, when the store can render it.
    pub acquired_at: Option<String>,
    pub expires_at: Option<String>,
}

impl LeaseRecord {
    pub fn holder(&self, activity: Option<String>) -> LockHolder {
        let runner = match (&self.operation, &self.hostname, self.pid) {
            (Some(op), Some(host), Some(pid)) => Some(format!("dirthara {op} {host}:{pid}")),
            _ => None,
        };
        LockHolder {
            session_id: None,
            application: runner,
            client_address: None,
            since: self.acquired_at.clone(),
            activity,
        }
    }
}

/// What the store says about the lease right now, judged by its own clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseObservation {
    Free,
    /// Held; `remaining` until it lapses.
    Held {
        record: LeaseRecord,
        remaining: Duration,
    },
    /// Its time ran out: the next attempt takes it.
    Stale {
        record: LeaseRecord,
        expired_for: Duration,
    },
    /// The expiry is missing or not a time: held, never stolen.
    Malformed {
        record: LeaseRecord,
    },
}

/// How to run the lease's atomic operations against one store.
///
/// Contract: `try_acquire` is a single atomic operation and reports "held" as `Ok(false)`,
/// never as an error (a MongoDB duplicate-key error 11000 or a SQL unique violation is
/// "held"); `renew` and `release` change the lease only if its owner id is `owner_id`.
#[async_trait]
pub trait LeaseStore: Send {
    async fn try_acquire(&mut self, request: &LeaseRequest) -> Result<bool>;
    /// Extends our lease by `ttl` from the store's now, if it is still ours and unexpired.
    async fn renew(&mut self, owner_id: &str, ttl: Duration) -> Result<bool>;
    /// Deletes our lease; `Ok(false)` when it was not ours any more (or gone).
    async fn release(&mut self, owner_id: &str) -> Result<bool>;
    async fn observe(&mut self) -> Result<LeaseObservation>;
    /// Deletes the lease whoever holds it; `Ok(false)` when there was none.
    async fn force_release(&mut self) -> Result<bool>;
    /// Whether a background heartbeat may renew while migrations run. SQLite allows one
    /// writer at a time, so there the lease is renewed before each migration instead.
    fn concurrent_renewal(&self) -> bool {
        true
    }
    async fn close(self: Box<Self>);
}

/// A shared handle: the heartbeat task and the engine take turns on the store.
pub(crate) type SharedStore = Arc<Mutex<Box<dyn LeaseStore>>>;

fn held_error(connection: &str, observation: &LeaseObservation) -> Error {
    let holder = match observation {
        LeaseObservation::Held { record, remaining } => Some(
            record
                .holder(Some(format!("lease expires in {}s", remaining.as_secs())))
                .to_string(),
        ),
        LeaseObservation::Malformed { record } => Some(
            record
                .holder(Some(
                    "its expiry is missing or not a date, so it never lapses by itself; \
                     clear it with `dirthara unlock --force`"
                        .to_string(),
                ))
                .to_string(),
        ),
        _ => None,
    };
    Error::new(ErrorKind::LockHeld {
        lock: LOCK_NAME.to_string(),
        connection: connection.to_string(),
        holder,
    })
}

/// Takes the lease, retrying with jittered backoff until `wait` runs out. The default wait
/// for a lease is none: a held lease fails at once with `MIGRATION_LOCK_HELD`.
pub(crate) async fn acquire_lease(
    store: &mut dyn LeaseStore,
    request: &LeaseRequest,
    connection: &str,
    wait: LockWait,
    events: &EventSink,
    shutdown: Option<&watch::Receiver<bool>>,
) -> Result<()> {
    let started = Instant::now();
    let deadline = match wait {
        LockWait::Forever => None,
        LockWait::For(limit) => Some(started + limit),
    };
    let mut backoff = Duration::from_millis(50);
    let mut next_report = started;
    loop {
        if store.try_acquire(request).await? {
            events.emit(Event::LockAcquired {
                lock: LOCK_NAME.to_string(),
                connection: connection.to_string(),
                waited: started.elapsed(),
            });
            return Ok(());
        }
        if shutdown.is_some_and(|rx| *rx.borrow()) {
            return Err(interrupted_while_waiting(started.elapsed()));
        }
        let now = Instant::now();
        let remaining = deadline.map(|d| d.saturating_duration_since(now));
        if remaining == Some(Duration::ZERO) {
            let observation = store.observe().await?;
            let held = held_error(connection, &observation);
            return Err(after_wait(held, wait, started.elapsed()));
        }
        if now >= next_report {
            let holder = match store.observe().await? {
                LeaseObservation::Held { record, remaining } => {
                    Some(record.holder(Some(format!("lease expires in {}s", remaining.as_secs()))))
                }
                LeaseObservation::Malformed { record } => Some(record.holder(None)),
                _ => None,
            };
            events.emit(Event::LockWaiting {
                lock: LOCK_NAME.to_string(),
                connection: connection.to_string(),
                holder,
                waited: now - started,
            });
            next_report = now + Duration::from_secs(10);
        }
        let nap = jittered(backoff);
        tokio::time::sleep(remaining.map_or(nap, |r| r.min(nap))).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// A held lease: renewed in the background (every third of the lease) where the store
/// allows, confirmed before each migration, released by owner id at the end.
pub(crate) struct LeaseGuard {
    store: SharedStore,
    owner_id: String,
    ttl: Duration,
    heartbeat: Option<JoinHandle<()>>,
    /// Set by the heartbeat when a renewal found the lease no longer ours.
    lost: Arc<AtomicBool>,
}

impl LeaseGuard {
    pub(crate) fn start(store: Box<dyn LeaseStore>, request: &LeaseRequest) -> Self {
        let concurrent = store.concurrent_renewal();
        let store: SharedStore = Arc::new(Mutex::new(store));
        let lost = Arc::new(AtomicBool::new(false));
        let heartbeat = concurrent.then(|| {
            let (store, lost) = (store.clone(), lost.clone());
            let (owner_id, ttl) = (request.owner_id.clone(), request.ttl);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(ttl / 3).await;
                    match store.lock().await.renew(&owner_id, ttl).await {
                        Ok(true) => {}
                        Ok(false) => {
                            lost.store(true, Ordering::SeqCst);
                            return;
                        }
                        // A failed renewal is retried at the next beat; the lease still
                        // has two thirds of its time, and the check before each migration
                        // decides for sure.
                        Err(_) => {}
                    }
                }
            })
        });
        LeaseGuard {
            store,
            owner_id: request.owner_id.clone(),
            ttl: request.ttl,
            heartbeat,
            lost,
        }
    }

    /// Confirms (and extends) the lease atomically by owner id: `Ok(false)` when it was lost.
    pub(crate) async fn confirm(&self) -> Result<bool> {
        if self.lost.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.store
            .lock()
            .await
            .renew(&self.owner_id, self.ttl)
            .await
    }

    /// Stops the heartbeat and deletes the lease if it is still ours. Returns the warning
    /// to report when it was not (or the release failed: the lease then lapses by itself).
    pub(crate) async fn release(mut self) -> Option<Warning> {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
            let _ = heartbeat.await;
        }
        let store = match Arc::try_unwrap(self.store) {
            Ok(mutex) => mutex.into_inner(),
            Err(_) => unreachable!("the heartbeat, the only other owner, has ended"),
        };
        let mut store = store;
        let released = store.release(&self.owner_id).await;
        store.close().await;
        match released {
            Ok(true) => None,
            Ok(false) => Some(Warning {
                code: Code::LockLeaseExpired,
                message: format!(
                    "our lease on `{LOCK_NAME}` was no longer ours when the run ended (it expired, \
                     or someone ran `dirthara unlock --force`), so another runner may hold the lock \
                     now; it was left untouched. If migrations run longer than the lease, raise \
                     --lock-ttl"
                ),
            }),
            Err(error) => Some(Warning {
                code: Code::MigrationLockFailed,
                message: format!(
                    "releasing the lease on `{LOCK_NAME}` failed ({error}); it lapses by itself \
                     when its time runs out"
                ),
            }),
        }
    }
}

#[cfg(test)]
pub(crate) mod memory;

#[cfg(test)]
mod tests;
