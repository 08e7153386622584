//! Looking at the lock without taking it (`status`, `unlock`), and breaking it
//! (`unlock --force`).
//!
//! Both primitives are looked at, whatever `locking` says: a runner configured differently
//! (`--locking lease` in one pipeline, the default in another) holds the other one, and an
//! operator who follows the troubleshooting page must see it and be able to clear it, never
//! be told "nothing to release" while a lock is held. Looking creates nothing: a lease table
//! that does not exist holds no lease.

use super::{lease, resolve_strategy, LockHost, LockStrategy, LOCK_NAME};
use crate::config::Locking;
use crate::error::{Error, ErrorKind, Result};
use crate::report::{ForceUnlockReport, LockReport, LockState, OtherLock};

/// The lock as `status` and `unlock` show it. A failed inspection is the state `unknown`
/// with its reason, so the rest of the command still answers.
pub async fn inspect(host: &mut dyn LockHost, locking: Locking, connection: &str) -> LockReport {
    let support = host.lock_support();
    let (strategy, state) = match resolve_strategy(locking, support) {
        Ok(resolved) => {
            let state = match resolved.strategy {
                LockStrategy::Off => Ok(LockState::Off),
                other => observe(host, other).await,
            };
            (Some(resolved.strategy), state.unwrap_or_else(unknown))
        }
        Err(refusal) => (
            None,
            LockState::Unsupported {
                reason: refusal.nothing_to_inspect(),
            },
        ),
    };
    let mut others = Vec::new();
    let mut candidates = Vec::new();
    if support.has_session_lock() {
        candidates.push(LockStrategy::Session);
    }
    candidates.push(LockStrategy::Lease);
    for other in candidates.into_iter().filter(|s| Some(*s) != strategy) {
        let state = observe(host, other).await.unwrap_or_else(unknown);
        if !matches!(state, LockState::Free) {
            others.push(OtherLock {
                strategy: other,
                state,
            });
        }
    }
    LockReport {
        name: LOCK_NAME.to_string(),
        connection: connection.to_string(),
        strategy,
        state,
        others,
    }
}

/// Releases every lock that is held, ending the holder's session(s) or deleting the lease;
/// a no-op that succeeds when nothing is held. Refuses when a lock cannot be inspected:
/// releasing blind could delete a live holder's lease.
pub async fn force_unlock(
    host: &mut dyn LockHost,
    locking: Locking,
    connection: &str,
) -> Result<ForceUnlockReport> {
    let report = inspect(host, locking, connection).await;
    let looked: Vec<(LockStrategy, &LockState)> = report
        .strategy
        .map(|s| (s, &report.state))
        .into_iter()
        .chain(report.others.iter().map(|o| (o.strategy, &o.state)))
        .collect();
    if let Some((strategy, LockState::Unknown { reason })) = looked
        .iter()
        .find(|(_, state)| matches!(state, LockState::Unknown { .. }))
    {
        return Err(Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: connection.to_string(),
            reason: format!(
                "the {} could not be inspected ({reason}), and releasing it blind could end a \
                 live holder's run; fix what stops it from being read, then run `dirthara \
                 unlock --force{}` again",
                strategy.noun(),
                match strategy {
                    LockStrategy::Lease => " --locking lease",
                    _ => "",
                }
            ),
        }));
    }
    let mut released = Vec::new();
    for (strategy, state) in looked {
        match (strategy, state) {
            (LockStrategy::Session, LockState::Held { .. }) => {
                if let Some(lock) = host.session_lock() {
                    for ended in lock.force_unlock().await? {
                        released.push(format!("session lock: {ended}"));
                    }
                }
            }
            (LockStrategy::Lease, LockState::Held { holder, .. } | LockState::Stale { holder }) => {
                if let Some(mut store) = host.lease_store(false).await? {
                    let deleted = store.force_release().await;
                    store.close().await;
                    if deleted? {
                        released.push(format!("lease: deleted the lease held by {holder}"));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(ForceUnlockReport {
        lock: report,
        released,
    })
}

/// The state of one primitive, read without creating anything.
async fn observe(host: &mut dyn LockHost, strategy: LockStrategy) -> Result<LockState> {
    match strategy {
        LockStrategy::Off => Ok(LockState::Off),
        LockStrategy::Session => match host.session_lock() {
            Some(lock) => Ok(match lock.holder().await? {
                Some(holder) => LockState::Held {
                    holder,
                    malformed: false,
                },
                None => LockState::Free,
            }),
            None => Ok(LockState::Free),
        },
        LockStrategy::Lease => match host.lease_store(false).await? {
            None => Ok(LockState::Free),
            Some(mut store) => {
                let observed = store.observe().await;
                store.close().await;
                Ok(lease::state_of(observed?))
            }
        },
    }
}

fn unknown(error: Error) -> LockState {
    let reason = match error.kind() {
        // The head of the report already names the lock and the connection.
        ErrorKind::LockFailed { reason, .. } => reason.clone(),
        _ => error.to_string(),
    };
    LockState::Unknown {
        reason: format!("[{}] {reason}", error.code()),
    }
}
