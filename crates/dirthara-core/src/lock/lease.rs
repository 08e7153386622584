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
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::wait::Contender;
use super::{ReleaseFailure, Released, LOCK_NAME};
use crate::backoff::Backoff;
use crate::error::{Code, Result};
use crate::events::{LockHolder, Warning};
use crate::report::LockState;

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
            hostname: crate::host::hostname(),
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
pub type SharedStore = Arc<Mutex<Box<dyn LeaseStore>>>;

/// The holder as a waiting runner reports it, with what the lease says about its time.
fn holder_of(observation: LeaseObservation) -> Option<LockHolder> {
    match observation {
        LeaseObservation::Held { record, remaining } => {
            Some(record.holder(Some(expires_in(remaining))))
        }
        LeaseObservation::Malformed { record } => Some(
            record.holder(Some(
                "its expiry is missing or not a date, so it never lapses by itself; clear it with \
             `dirthara unlock --force`"
                    .to_string(),
            )),
        ),
        LeaseObservation::Free | LeaseObservation::Stale { .. } => None,
    }
}

/// How a lease looks to `status` and `unlock`; a malformed one counts as held.
pub fn state_of(observed: LeaseObservation) -> LockState {
    match observed {
        LeaseObservation::Free => LockState::Free,
        LeaseObservation::Held { record, remaining } => LockState::Held {
            holder: record.holder(Some(expires_in(remaining))),
            malformed: false,
        },
        LeaseObservation::Malformed { record } => LockState::Held {
            holder: record.holder(Some(
                "its expiry is missing or not a date: held until `dirthara unlock --force`".into(),
            )),
            malformed: true,
        },
        LeaseObservation::Stale {
            record,
            expired_for,
        } => LockState::Stale {
            holder: record.holder(Some(format!(
                "lease expired {} ago; the next runner takes it",
                crate::format_duration(expired_for)
            ))),
        },
    }
}

fn expires_in(remaining: Duration) -> String {
    format!("lease expires in {}", crate::format_duration(remaining))
}

/// Contending for the lease: one atomic attempt at a time, with jittered backoff (from 50 ms,
/// doubling up to 2 s) in between. The default wait for a lease is none: a held lease fails
/// at once with `MIGRATION_LOCK_HELD`.
pub struct LeaseContender<'a> {
    store: &'a mut dyn LeaseStore,
    request: &'a LeaseRequest,
    backoff: Backoff,
}

impl<'a> LeaseContender<'a> {
    pub fn new(store: &'a mut dyn LeaseStore, request: &'a LeaseRequest) -> Self {
        LeaseContender {
            store,
            request,
            backoff: Backoff::new(Duration::from_millis(50), Duration::from_secs(2)),
        }
    }
}

#[async_trait]
impl Contender for LeaseContender<'_> {
    async fn try_take(&mut self) -> Result<bool> {
        let taken = self.store.try_acquire(self.request).await?;
        // Planted fault (tests only): a lease another runner holds reported taken.
        fail_point!("lease_taken_while_held", !taken, |_| Ok(true));
        Ok(taken)
    }

    async fn holder(&mut self) -> Result<Option<LockHolder>> {
        Ok(holder_of(self.store.observe().await?))
    }

    async fn pause(&mut self, remaining: Option<Duration>) -> Result<()> {
        let nap = self.backoff.next_pause();
        tokio::time::sleep(remaining.map_or(nap, |r| r.min(nap))).await;
        Ok(())
    }
}

/// A held lease: renewed in the background (every third of the lease) where the store
/// allows, confirmed before each migration, released by owner id at the end.
pub struct LeaseGuard {
    store: SharedStore,
    owner_id: String,
    ttl: Duration,
    heartbeat: Option<Heartbeat>,
    /// Set by the heartbeat when a renewal found the lease no longer ours.
    lost: Arc<AtomicBool>,
}

impl LeaseGuard {
    pub fn start(store: Box<dyn LeaseStore>, request: &LeaseRequest) -> Self {
        let concurrent = store.concurrent_renewal();
        let store: SharedStore = Arc::new(Mutex::new(store));
        let lost = Arc::new(AtomicBool::new(false));
        let heartbeat = concurrent.then(|| {
            let (store, lost) = (store.clone(), lost.clone());
            let (owner_id, ttl) = (request.owner_id.clone(), request.ttl);
            Heartbeat(tokio::spawn(async move {
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
            }))
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
    pub async fn confirm(&self) -> Result<bool> {
        if self.lost.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.store
            .lock()
            .await
            .renew(&self.owner_id, self.ttl)
            .await
    }

    /// Stops the heartbeat and deletes the lease if it is still ours (a failed delete leaves
    /// it to lapse by itself).
    pub async fn release(mut self) -> std::result::Result<Released, ReleaseFailure> {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.stop().await;
        }
        let store = match Arc::try_unwrap(self.store) {
            Ok(mutex) => mutex.into_inner(),
            Err(_) => unreachable!("the heartbeat, the only other owner, has ended"),
        };
        let mut store = store;
        let released = if planted!("lease_released_whoever_holds_it") {
            // Planted fault (tests only): the lease deleted whoever holds it now.
            store.force_release().await
        } else {
            store.release(&self.owner_id).await
        };
        store.close().await;
        match released {
            Ok(true) => Ok(Released::Cleanly),
            Ok(false) => Ok(Released::NoLongerOurs(Warning {
                code: Code::LockLeaseExpired,
                message: format!(
                    "our lease on `{LOCK_NAME}` was no longer ours when the run ended (it expired, \
                     or someone ran `dirthara unlock --force`), so another runner may hold the lock \
                     now; it was left untouched. If migrations run longer than the lease, raise \
                     --lock-ttl"
                ),
            })),
            Err(error) => Err(ReleaseFailure {
                reason: format!(
                    "releasing the lease on `{LOCK_NAME}` failed ({error}); it lapses by itself \
                     when its time runs out"
                ),
                cause: error,
                lapses_by_itself: true,
            }),
        }
    }
}

/// The renewal task. Stopped when dropped, so a command abandoned half-way (its future
/// dropped) stops renewing and its lease lapses.
struct Heartbeat(JoinHandle<()>);

impl Heartbeat {
    async fn stop(mut self) {
        self.0.abort();
        let _ = (&mut self.0).await;
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod memory;

#[cfg(test)]
mod tests;
