//! The SQLite lease store against real files: busy files and racing runners.
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, SqliteConnection};

use crate::backend::{sqlite, Backend, BackendKind, ConnectRequest};
use crate::lock::LeaseRequest;

async fn backend(url: &str) -> Box<dyn Backend> {
    let request = ConnectRequest {
        name: "default".into(),
        kind: BackendKind::Sqlite,
        url: url.into(),
        operation: "migrate".into(),
        connect_timeout: Duration::from_secs(5),
        read_only: false,
        init_sql: None,
        history_table: "dirthara_migrations".into(),
        schema: None,
        shared_schemas: Vec::new(),
    };
    match sqlite::connect(&request).await {
        Ok(backend) => backend,
        Err(failure) => panic!("{}", failure.message),
    }
}

/// The flake, made deterministic: another process holds the file's write lock for longer
/// than the lease connection's 200 ms busy timeout while we create the lease table.
/// Opening must wait it out, not fail with "database is locked".
#[tokio::test(flavor = "multi_thread")]
async fn creating_the_lease_table_waits_out_a_busy_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}?mode=rwc", dir.path().join("busy.db").display());
    let mut blocker = SqliteConnection::connect(&url).await.unwrap();
    blocker
        .execute("CREATE TABLE other (id INT)")
        .await
        .unwrap();
    blocker.execute("BEGIN IMMEDIATE").await.unwrap();
    blocker
        .execute("INSERT INTO other VALUES (1)")
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(900)).await;
        blocker.execute("COMMIT").await.unwrap();
        blocker
    });
    let started = Instant::now();
    let mut backend = backend(&url).await;
    let store = backend.lease_store(true).await;
    let store = store
        .unwrap_or_else(|e| panic!("a busy file is not a failure: {e}"))
        .expect("created");
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "the table was created while another process held the write lock"
    );
    store.close().await;
    release.await.unwrap().close().await.unwrap();
}

/// Eight runners open the store on one fresh file at once: every one opens it, and
/// exactly one takes the lease.
#[tokio::test(flavor = "multi_thread")]
async fn runners_racing_to_create_the_lease_table_all_get_an_answer() {
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("race.db").display());
        // The file exists before the race, as it does once the first runner connected.
        backend(&url).await.close().await;
        let runners = (0..8).map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let mut backend = backend(&url).await;
                let mut store = backend
                    .lease_store(true)
                    .await
                    .unwrap_or_else(|e| panic!("opening the lease store failed: {e}"))
                    .expect("created");
                let request = LeaseRequest::new("migrate", Duration::from_secs(60));
                let taken = store
                    .try_acquire(&request)
                    .await
                    .unwrap_or_else(|e| panic!("acquiring failed: {e}"));
                store.close().await;
                backend.close().await;
                taken
            })
        });
        let mut taken = 0;
        for runner in runners.collect::<Vec<_>>() {
            taken += usize::from(runner.await.unwrap());
        }
        assert_eq!(taken, 1, "exactly one runner takes a free lease");
    }
}
