//! What a DBA finds in the server's records after dirthara ran: nothing. No error from a
//! statement of dirthara's own (no probe that fails on purpose), no session without a name,
//! no client that vanished without saying goodbye — through a first run, a no-op, `status`,
//! a rollback, four runners contending, a runner that will not wait giving up, and a
//! hand-over to a waiting runner.
//!
//! The servers are private ones of the test's own, told to record what the machine's servers
//! must never be reconfigured to record: PostgreSQL logs every error, every connection and
//! disconnection and every client that leaves without the protocol's goodbye (`debug1`);
//! MariaDB counts every statement's errors in `performance_schema` and logs every aborted
//! connection.

mod support;

use std::process::{Child, Output};

use sqlx::{Connection, Executor, MySqlConnection};
use support::private_server::PrivateServer;
use support::servers::{Server, TestDb};
use support::{dirthara, spawn, text, wait_with_watchdog, Migrations};

/// Everything dirthara does in one scenario, on the database at `url`.
fn scenario(server: Server, url: &str) {
    let m = Migrations::new();
    for version in 1..=3 {
        let up = format!("CREATE TABLE t{version} (id INT)");
        let down = format!("DROP TABLE t{version}");
        m.add(version, &format!("t{version}"), &up, Some(&down));
    }
    let ok = |args: &[&str]| {
        let out = dirthara(url, m.path(), args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {:?}", text(&out));
    };
    ok(&["migrate"]); // the first run, on an empty database
    ok(&["migrate"]); // nothing to do
    ok(&["status"]);
    ok(&["rollback"]);
    ok(&["migrate"]);

    // Four runners at once on a migration that takes a moment: one applies, three wait.
    m.add(4, "slow", &server.sleep(0.5), None);
    let runners: Vec<Child> = (0..4)
        .map(|_| spawn(dirthara(url, m.path(), &["migrate"])))
        .collect();
    for runner in runners {
        let out = wait_with_watchdog(runner, std::time::Duration::from_secs(60));
        assert!(out.status.success(), "{:?}", text(&out));
    }

    // A hand-over: the holder runs a slow migration, a second runner waits for it (on
    // PostgreSQL, listening for the release) and then finds nothing left to do.
    m.add(5, "slower", &server.sleep(1.0), None);
    let holder = spawn(dirthara(url, m.path(), &["migrate", "--output", "json"]));
    support::wait_until_held(|| dirthara(url, m.path(), &["unlock", "--output", "json"]));
    // A runner that will not wait gives up at once; whatever it opened to try is closed.
    let busy = dirthara(url, m.path(), &["migrate", "--lock-wait", "0"])
        .output()
        .unwrap();
    assert!(
        !busy.status.success() && text(&busy).1.contains("MIGRATION_LOCK_HELD"),
        "{:?}",
        text(&busy)
    );
    let waiter: Output = dirthara(url, m.path(), &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(waiter.status.success(), "{:?}", text(&waiter));
    assert_eq!(support::applied_versions(&waiter), Vec::<i64>::new());
    let holder = wait_with_watchdog(holder, std::time::Duration::from_secs(60));
    assert_eq!(
        support::applied_versions(&holder),
        [5],
        "{:?}",
        text(&holder)
    );
}

/// The lines of a PostgreSQL log that a DBA would frown at, from the sessions dirthara opened
/// on `database`; and every session opened there that did not name itself `dirthara ...`.
fn frowned_at(log: &str, database: &str) -> Vec<String> {
    let ours =
        |line: &str| line.contains("app=dirthara ") && line.contains(&format!("db={database}:"));
    let bad = [
        "ERROR:",
        "FATAL:",
        "PANIC:",
        "could not receive data from client",
        "unexpected EOF on client connection",
        "connection to client lost",
    ];
    let mut found: Vec<String> = (log.lines())
        .filter(|line| ours(line) && bad.iter().any(|b| line.contains(b)))
        .map(str::to_string)
        .collect();
    let authorized = format!("connection authorized: user=postgres database={database}");
    found.extend(
        (log.lines())
            .filter(|line| {
                line.contains(&authorized) && !line.contains("application_name=dirthara ")
            })
            .map(|line| format!("a session without dirthara's name: {line}")),
    );
    found
}

#[tokio::test]
async fn postgres_server_log_has_nothing_from_dirthara() {
    let settings = [
        "log_line_prefix=%m [%p] app=%a db=%d: ",
        "log_min_messages=debug1",
        "log_min_error_statement=error",
        "log_connections=on",
        "log_disconnections=on",
    ];
    let Some(server) = PrivateServer::start_with_or_skip(Server::Postgres, &settings) else {
        return;
    };
    let db = TestDb::try_create_at(Server::Postgres, &server.admin_url())
        .await
        .unwrap();
    // A direct connection (the usual case), and one through the server's socket, which
    // takes the full check that no pooler stands in between (a second connection).
    scenario(Server::Postgres, &db.url);
    let by_socket = TestDb::try_create_at(Server::Postgres, &server.admin_url())
        .await
        .unwrap();
    // The socket's directory as the host, percent-encoded, as sqlx reads it.
    let socket_url = format!(
        "postgres://postgres@{}:{}/{}",
        server.root().display().to_string().replace('/', "%2F"),
        by_socket.port(),
        by_socket.name,
    );
    scenario(Server::Postgres, &socket_url);

    let log = server.log();
    for database in [&db.name, &by_socket.name] {
        let found = frowned_at(&log, database);
        assert!(found.is_empty(), "{}", found.join("\n"));
        let connected = format!("database={database} application_name=dirthara migrate");
        assert!(
            log.contains(&connected),
            "the log records the runners' connections ({connected}): {}",
            &log[log.len().saturating_sub(2000)..]
        );
    }
}

#[tokio::test]
async fn mariadb_records_no_error_and_no_aborted_connection_from_dirthara() {
    let settings = ["performance-schema=ON", "log-warnings=4"];
    let Some(server) = PrivateServer::start_with_or_skip(Server::Mysql, &settings) else {
        return;
    };
    let db = TestDb::try_create_at(Server::Mysql, &server.admin_url())
        .await
        .unwrap();
    // The runners connect as a user of their own, so what they did is told apart from the
    // test's own connections.
    let mut admin = MySqlConnection::connect(&server.admin_url()).await.unwrap();
    for sql in [
        "CREATE USER runner@'%'".to_string(),
        "GRANT ALL ON *.* TO runner@'%'".to_string(),
    ] {
        admin.execute(sql.as_str()).await.unwrap();
    }
    let url = db.url.replacen("root@", "runner@", 1);
    assert_ne!(url, db.url, "{url}");
    scenario(Server::Mysql, &url);

    let count = |column: &str| {
        format!(
            "SELECT CAST(COALESCE(SUM({column}), 0) AS CHAR) FROM \
             performance_schema.events_statements_summary_by_user_by_event_name \
             WHERE USER = 'runner'"
        )
    };
    let (statements,): (String,) = sqlx::query_as(&count("COUNT_STAR"))
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let (errors,): (String,) = sqlx::query_as(&count("SUM_ERRORS"))
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let failing: Vec<(String, String)> = sqlx::query_as(
        "SELECT CAST(DIGEST_TEXT AS CHAR), CAST(SUM_ERRORS AS CHAR) FROM \
         performance_schema.events_statements_summary_by_digest WHERE SUM_ERRORS > 0 \
         AND SCHEMA_NAME = ?",
    )
    .bind(&db.name)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    admin.close().await.unwrap();
    assert!(
        statements.parse::<u64>().unwrap() > 100,
        "performance_schema counted the runners' statements: {statements}"
    );
    assert!(
        errors == "0" && failing.is_empty(),
        "statements of dirthara's failed: {errors} {failing:?}"
    );
    let aborted: Vec<String> = (server.log().lines())
        .filter(|line| line.contains("Aborted connection") && line.contains("user: 'runner'"))
        .map(str::to_string)
        .collect();
    assert!(aborted.is_empty(), "{}", aborted.join("\n"));
}
