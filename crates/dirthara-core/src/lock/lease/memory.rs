//! An in-memory lease store on tokio's clock, so tests can pause and advance time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{LeaseObservation, LeaseRecord, LeaseRequest, LeaseStore};
use crate::error::Result;

/// How a stored lease's expiry looks: a time, or one of the malformed shapes a document
/// can take (missing field, string, number, null).
#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    At(Instant),
    Missing,
    Text(String),
    Number(f64),
    Null,
}

#[derive(Debug, Default)]
pub struct LeaseState {
    pub lease: Option<(LeaseRecord, Expiry)>,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryLeaseStore(pub Arc<Mutex<LeaseState>>);

impl MemoryLeaseStore {
    pub fn owner(&self) -> Option<String> {
        let state = self.0.lock().unwrap();
        state.lease.as_ref().and_then(|(r, _)| r.owner_id.clone())
    }

    /// Someone else holds a live lease now.
    pub fn put_owner(&self, owner: &str) {
        let record = LeaseRecord {
            owner_id: Some(owner.into()),
            ..LeaseRecord::default()
        };
        let expiry = Expiry::At(Instant::now() + Duration::from_secs(600));
        self.0.lock().unwrap().lease = Some((record, expiry));
    }

    pub fn put_malformed(&self, expiry: Expiry) {
        let record = LeaseRecord {
            owner_id: Some("someone-else".into()),
            hostname: Some("old-host".into()),
            pid: Some(7),
            operation: Some("migrate".into()),
            ..LeaseRecord::default()
        };
        self.0.lock().unwrap().lease = Some((record, expiry));
    }
}

#[async_trait]
impl LeaseStore for MemoryLeaseStore {
    async fn try_acquire(&mut self, request: &LeaseRequest) -> Result<bool> {
        let now = Instant::now();
        let mut state = self.0.lock().unwrap();
        let free = match &state.lease {
            None => true,
            Some((_, Expiry::At(t))) => *t < now,
            Some(_) => false,
        };
        if free {
            let record = LeaseRecord {
                owner_id: Some(request.owner_id.clone()),
                hostname: Some(request.hostname.clone()),
                pid: Some(i64::from(request.pid)),
                operation: Some(request.operation.clone()),
                acquired_at: Some("now".into()),
                expires_at: None,
            };
            state.lease = Some((record, Expiry::At(now + request.ttl)));
        }
        Ok(free)
    }

    async fn renew(&mut self, owner_id: &str, ttl: Duration) -> Result<bool> {
        let now = Instant::now();
        let mut state = self.0.lock().unwrap();
        let ours_and_live = matches!(
            &state.lease,
            Some((record, Expiry::At(t))) if record.owner_id.as_deref() == Some(owner_id) && *t >= now
        );
        if ours_and_live {
            if let Some((_, expiry)) = &mut state.lease {
                *expiry = Expiry::At(now + ttl);
            }
        }
        Ok(ours_and_live)
    }

    async fn release(&mut self, owner_id: &str) -> Result<bool> {
        let mut state = self.0.lock().unwrap();
        let ours = matches!(&state.lease, Some((r, _)) if r.owner_id.as_deref() == Some(owner_id));
        if ours {
            state.lease = None;
        }
        Ok(ours)
    }

    async fn observe(&mut self) -> Result<LeaseObservation> {
        let now = Instant::now();
        let state = self.0.lock().unwrap();
        Ok(match &state.lease {
            None => LeaseObservation::Free,
            Some((record, Expiry::At(t))) if *t > now => LeaseObservation::Held {
                record: record.clone(),
                remaining: *t - now,
            },
            Some((record, Expiry::At(t))) => LeaseObservation::Stale {
                record: record.clone(),
                expired_for: now - *t,
            },
            Some((record, _)) => LeaseObservation::Malformed {
                record: record.clone(),
            },
        })
    }

    async fn force_release(&mut self) -> Result<bool> {
        Ok(self.0.lock().unwrap().lease.take().is_some())
    }

    async fn close(self: Box<Self>) {}
}
