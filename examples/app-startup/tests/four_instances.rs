//! Four instances of the application start at once against one empty database: all of them
//! start, and each migration is applied exactly once.

use std::process::{Command, Stdio};

mod common;

use common::Scratch;
use sqlx::{Connection, Executor, Row};

#[tokio::test(flavor = "multi_thread")]
async fn four_instances_started_together_all_start_and_migrate_once() {
    let Some(db) = Scratch::create("dirthara_app").await else {
        return;
    };
    let url = db.url.clone();

    let instances: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_app-startup"))
                .env("DATABASE_URL", &url)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = instances
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();

    let mut applied = Vec::new();
    for out in &outputs {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let n: usize = stdout
            .trim()
            .strip_prefix("ready: applied ")
            .unwrap()
            .parse()
            .unwrap();
        applied.push(n);
    }
    applied.sort();
    assert_eq!(
        applied,
        vec![0, 0, 0, 3],
        "one instance applies everything, the rest nothing"
    );

    let mut app = db.connect().await;
    let rows = app
        .fetch_all("SELECT version, batch FROM dirthara_migrations ORDER BY version")
        .await
        .unwrap();
    let history: Vec<(i64, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(history, vec![(1, 1), (2, 1), (3, 1)]);
    app.close().await.unwrap();
    db.drop_now().await;
}
