//! Four instances of the application start at once against one empty database: all of them
//! start, and each migration is applied exactly once.

use std::process::{Command, Stdio};

use sqlx::{Connection, Executor, PgConnection, Row};

fn admin_url() -> String {
    std::env::var("DIRTHARA_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

#[tokio::test(flavor = "multi_thread")]
async fn four_instances_started_together_all_start_and_migrate_once() {
    let admin = admin_url();
    let mut conn = match PgConnection::connect(&admin).await {
        Ok(conn) => conn,
        Err(error) if std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() != Ok("1") => {
            eprintln!("SKIPPED: PostgreSQL at {admin} is not usable ({error})");
            return;
        }
        Err(error) => panic!(
            "PostgreSQL at {admin} is not usable ({error}); DIRTHARA_REQUIRE_SERVERS=1 requires it"
        ),
    };
    let name = format!("dirthara_app_{}", std::process::id());
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap().to_string();
    let url = format!("{base}/{name}");

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

    let mut app = PgConnection::connect(&url).await.unwrap();
    let rows = app
        .fetch_all("SELECT version, batch FROM dirthara_migrations ORDER BY version")
        .await
        .unwrap();
    let history: Vec<(i64, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(history, vec![(1, 1), (2, 1), (3, 1)]);
    app.close().await.unwrap();
    conn.execute(format!("DROP DATABASE {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
}
