//! The lease algorithm on an in-memory store with virtual time: no sleeping.

use std::time::Duration;

use super::memory::{Expiry, MemoryLeaseStore};
use super::*;
use crate::config::LockWait;
use crate::events::EventSink;
use crate::lock::wait::{contend, Waiting};
use tokio::sync::watch;

/// The one wait loop, contending for a lease.
async fn acquire_lease(
    store: &mut dyn LeaseStore,
    request: &LeaseRequest,
    connection: &str,
    wait: LockWait,
    events: &EventSink,
    shutdown: Option<&watch::Receiver<bool>>,
) -> Result<()> {
    let waiting = Waiting {
        connection,
        wait,
        events,
        shutdown,
        operation: &request.operation,
        lease_ttl: request.ttl,
    };
    contend(&mut LeaseContender::new(store, request), &waiting).await
}

const TTL: Duration = Duration::from_secs(30);

fn request(operation: &str) -> LeaseRequest {
    LeaseRequest::new(operation, TTL)
}

async fn acquire(store: &MemoryLeaseStore, req: &LeaseRequest, wait: LockWait) -> Result<()> {
    let mut handle = store.clone();
    acquire_lease(
        &mut handle,
        req,
        "default",
        wait,
        &EventSink::discard(),
        None,
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn a_held_lease_fails_at_once_naming_its_holder() {
    let store = MemoryLeaseStore::default();
    acquire(&store, &request("migrate"), LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let err = acquire(&store, &request("rollback"), LockWait::For(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::MigrationLockHeld);
    assert_eq!(started.elapsed(), Duration::ZERO, "no waiting by default");
    let text = err.to_string();
    assert!(text.contains("dirthara migrate"), "{text}");
    assert!(text.contains(&format!(":{}", std::process::id())), "{text}");
    assert!(text.contains("lease expires in 30 s"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_crashed_holders_lease_lapses_and_the_next_attempt_takes_it() {
    let store = MemoryLeaseStore::default();
    let crashed = request("migrate");
    acquire(&store, &crashed, LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let next = request("migrate");
    tokio::time::advance(TTL - Duration::from_secs(1)).await;
    assert!(acquire(&store, &next, LockWait::For(Duration::ZERO))
        .await
        .is_err());
    tokio::time::advance(Duration::from_secs(2)).await;
    let mut probe = store.clone();
    assert!(matches!(
        probe.observe().await.unwrap(),
        LeaseObservation::Stale { .. }
    ));
    acquire(&store, &next, LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(store.owner(), Some(next.owner_id));
}

#[tokio::test(start_paused = true)]
async fn a_waiting_runner_takes_the_lease_once_it_lapses() {
    let store = MemoryLeaseStore::default();
    acquire(&store, &request("migrate"), LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let patient = request("migrate");
    let started = tokio::time::Instant::now();
    acquire(&store, &patient, LockWait::For(Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(started.elapsed() >= TTL);
    assert_eq!(store.owner(), Some(patient.owner_id));
}

#[tokio::test(start_paused = true)]
async fn renewal_keeps_a_long_run_protected_past_the_original_lease() {
    let store = MemoryLeaseStore::default();
    let holder = request("migrate");
    acquire(&store, &holder, LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let guard = LeaseGuard::start(Box::new(store.clone()), &holder);
    // The heartbeat renews every TTL/3: after three leases' worth of time it is still ours.
    for _ in 0..9 {
        tokio::time::advance(TTL / 3).await;
        tokio::task::yield_now().await;
    }
    let intruder = request("migrate");
    assert!(acquire(&store, &intruder, LockWait::For(Duration::ZERO))
        .await
        .is_err());
    assert!(guard.confirm().await.unwrap());
    assert!(matches!(guard.release().await, Ok(Released::Cleanly)));
    assert_eq!(store.owner(), None);
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_is_detected_and_the_new_holders_lease_is_never_deleted() {
    let store = MemoryLeaseStore::default();
    let first = request("migrate");
    acquire(&store, &first, LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let guard = LeaseGuard::start(Box::new(store.clone()), &first);
    // An operator force-unlocks, and another runner takes the lock.
    let mut operator = store.clone();
    assert!(operator.force_release().await.unwrap());
    let second = request("migrate");
    acquire(&store, &second, LockWait::For(Duration::ZERO))
        .await
        .unwrap();

    assert!(
        !guard.confirm().await.unwrap(),
        "the first runner must see it lost the lease"
    );
    let Ok(Released::NoLongerOurs(warning)) = guard.release().await else {
        panic!("a warning, not silence");
    };
    assert_eq!(warning.code, Code::LockLeaseExpired);
    assert_eq!(
        store.owner(),
        Some(second.owner_id),
        "never delete another runner's lock"
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_cannot_be_renewed_even_by_its_owner() {
    let store = MemoryLeaseStore::default();
    let holder = request("migrate");
    acquire(&store, &holder, LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let mut handle = store.clone();
    tokio::time::advance(TTL + Duration::from_secs(1)).await;
    // Someone else could have taken it at any moment since: it is not ours to extend.
    assert!(!handle.renew(&holder.owner_id, TTL).await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn release_only_deletes_our_own_lease() {
    let store = MemoryLeaseStore::default();
    let holder = request("migrate");
    acquire(&store, &holder, LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let mut handle = store.clone();
    assert!(!handle.release("not-the-owner").await.unwrap());
    assert_eq!(store.owner(), Some(holder.owner_id.clone()));
    assert!(handle.release(&holder.owner_id).await.unwrap());
    assert!(
        !handle.force_release().await.unwrap(),
        "force on a free lock is a no-op"
    );
}

#[tokio::test(start_paused = true)]
async fn a_malformed_expiry_counts_as_held_by_acquire_and_by_status() {
    for expiry in [
        Expiry::Missing,
        Expiry::Text("2020-01-01T00:00:00Z".into()),
        Expiry::Number(0.0),
        Expiry::Null,
    ] {
        let store = MemoryLeaseStore::default();
        store.put_malformed(expiry.clone());
        // Even long after any plausible expiry.
        tokio::time::advance(Duration::from_secs(86_400)).await;
        let err = acquire(&store, &request("migrate"), LockWait::For(Duration::ZERO))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::MigrationLockHeld, "{expiry:?}");
        assert!(err.to_string().contains("unlock --force"), "{err}");
        let mut probe = store.clone();
        assert!(
            matches!(
                probe.observe().await.unwrap(),
                LeaseObservation::Malformed { .. }
            ),
            "{expiry:?}"
        );
        assert_eq!(store.owner().as_deref(), Some("someone-else"));
    }
}

// Real time: the wait's deadline is kept on the process clock, which a paused runtime
// does not move.
#[tokio::test]
async fn a_bounded_wait_that_runs_out_says_how_long_and_does_not_advise_waiting() {
    let store = MemoryLeaseStore::default();
    acquire(&store, &request("migrate"), LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let wait = Duration::from_millis(300);
    let err = acquire(&store, &request("migrate"), LockWait::For(wait))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::MigrationLockHeld);
    assert!(
        err.waited().is_some_and(|w| w >= wait),
        "{:?}",
        err.waited()
    );
    let text = err.to_string();
    assert!(
        text.contains("still held the lock after waiting "),
        "{text}"
    );
    assert!(text.contains(" (--lock-wait)"), "{text}");
    assert!(text.contains("`dirthara unlock --force`"), "{text}");
    assert!(text.contains("--lock-wait forever"), "{text}");
    assert!(!text.contains("wait for it with --lock-wait"), "{text}");

    // No wait asked for: waiting is the advice, and no wait is reported.
    let err = acquire(&store, &request("migrate"), LockWait::For(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.waited(), None);
    assert!(
        err.to_string().contains("wait for it with --lock-wait"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_while_waiting_says_nothing_was_started() {
    let store = MemoryLeaseStore::default();
    acquire(&store, &request("migrate"), LockWait::For(Duration::ZERO))
        .await
        .unwrap();
    let (stop, shutdown) = watch::channel(false);
    let mut handle = store.clone();
    let waiting = tokio::spawn(async move {
        let req = request("migrate");
        acquire_lease(
            &mut handle,
            &req,
            "default",
            LockWait::Forever,
            &EventSink::discard(),
            Some(&shutdown),
        )
        .await
    });
    tokio::time::advance(Duration::from_secs(3)).await;
    stop.send(true).unwrap();
    let err = waiting.await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Interrupted);
    assert!(err.waited().is_some());
    let text = err.to_string();
    assert!(
        text.contains("interrupted while waiting for the lock"),
        "{text}"
    );
    assert!(text.contains("no migration was started"), "{text}");
    assert!(!text.contains("was finished and recorded"), "{text}");
}
