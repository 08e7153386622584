//! A run that would pass on nothing is an error, on PostgreSQL and MariaDB: a fleet whose
//! source names no target (`FLEET_EMPTY`, unless `--allow-empty-fleet`), directories with no
//! migration (`NO_MIGRATIONS`, creating nothing), and a role that may not read the history or
//! use its tenant's schema (`PERMISSION_DENIED` at once, with the grant), where each used to
//! report "nothing applied" and exit 0, or wait out its whole timeout. On MongoDB (a test
//! server of its own, with authentication on), a user refused an action is told so too.

mod support;

use std::time::{Duration, Instant};

use support::servers::{Server, TestDb};
use support::{dirthara, dirthara_command, scratch_dir, text, Migrations};

crate::scenario_tests! {
    postgres => Server::Postgres => [
        a_fleet_that_names_no_target_is_an_error_unless_allowed,
        directories_without_a_migration_are_an_error_and_nothing_is_created,
        a_role_that_may_not_read_the_history_is_told_so_at_once,
    ],
    mariadb => Server::Mysql => [
        a_fleet_that_names_no_target_is_an_error_unless_allowed,
        directories_without_a_migration_are_an_error_and_nothing_is_created,
        a_role_that_may_not_read_the_history_is_told_so_at_once,
    ],
}

/// `dirthara -d URL --dir DIR <args>` with the fleet flags in `args`.
fn run(url: &str, dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = dirthara(url, dir, args).output().unwrap();
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout, stderr)
}

async fn a_fleet_that_names_no_target_is_an_error_unless_allowed(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::tables(1);
    // A pattern that matches nothing: on PostgreSQL a schema in the wrong case (the one it
    // was meant for exists); on MariaDB databases under this test's own prefix.
    let (flag, typo) = match server {
        Server::Postgres => {
            db.execute("CREATE SCHEMA tenant_a").await;
            ("--schemas", "Tenant_*".to_string())
        }
        _ => ("--databases", format!("{}_tenant_*", db.name)),
    };
    let targets = scratch_dir();
    let empty_file = targets.path().join("tenants.txt");
    std::fs::write(&empty_file, "# the tenants\n\n   # none yet\n").unwrap();
    let no_rows = match server {
        Server::Postgres => "SELECT 'x', 'postgres://h/x' WHERE false",
        _ => "SELECT 'x', 'mysql://h/x' FROM DUAL WHERE 1 = 0",
    };
    let sources: [(&str, String, &str); 3] = [
        (flag, typo.clone(), "none matching"),
        (
            "--targets",
            empty_file.display().to_string(),
            "the file has no target line",
        ),
        (
            "--targets-sql",
            no_rows.to_string(),
            "the query returned no row",
        ),
    ];
    for (flag, value, found) in &sources {
        for command in [&["migrate"][..], &["status"], &["wait", "--timeout", "5s"]] {
            let mut args = vec![*flag, value.as_str()];
            args.extend_from_slice(command);
            let (code, stdout, stderr) = run(&db.url, m.path(), &args);
            assert_eq!(code, Some(1), "{args:?}: {stdout}\n{stderr}");
            assert!(
                stderr.contains("Error [FLEET_EMPTY]:")
                    && stderr.contains(found)
                    && stderr.contains("--allow-empty-fleet"),
                "{args:?}: {stderr}"
            );
            let mut allowed = args.clone();
            allowed.insert(0, "--allow-empty-fleet");
            let (code, stdout, stderr) = run(&db.url, m.path(), &allowed);
            assert_eq!(code, Some(0), "{allowed:?}: {stdout}\n{stderr}");
        }
    }
    // A pattern in the wrong case is shown the names it nearly matched.
    if server == Server::Postgres {
        let (_, _, stderr) = run(&db.url, m.path(), &["--schemas", &typo, "status"]);
        assert!(stderr.contains("nearest: `tenant_a`"), "{stderr}");
    }
    assert!(
        !db.tables().await.iter().any(|t| t.starts_with("dirthara")),
        "nothing was created: {:?}",
        db.tables().await
    );
}

async fn directories_without_a_migration_are_an_error_and_nothing_is_created(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let empty = Migrations::new();
    // A directory with files that are not migrations is as empty.
    std::fs::write(empty.path().join("README.md"), "# migrations\n").unwrap();
    for command in [
        &["migrate"][..],
        &["status"],
        &["wait", "--timeout", "5s"],
        &["preview", "migrate"],
        &["fresh", "--force"],
    ] {
        let (code, stdout, stderr) = run(&db.url, empty.path(), command);
        assert_eq!(code, Some(1), "{command:?}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("Error [NO_MIGRATIONS]: no migrations in `")
                && stderr.contains(&empty.path().display().to_string())
                && stderr.contains("Point --dir"),
            "{command:?}: {stderr}"
        );
    }
    assert_eq!(
        db.tables().await,
        Vec::<String>::new(),
        "nothing was created"
    );
    // Several directories are each named.
    let other = Migrations::new();
    let out = dirthara_command()
        .args(["-d", &db.url, "--dir"])
        .arg(empty.path())
        .arg("--dir")
        .arg(other.path())
        .arg("migrate")
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains(&empty.path().display().to_string())
            && stderr.contains(&other.path().display().to_string()),
        "{stderr}"
    );
}

async fn a_role_that_may_not_read_the_history_is_told_so_at_once(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::tables(2);
    let (code, stdout, stderr) = run(&db.url, m.path(), &["migrate"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    // A role that reads the application's tables, granted before dirthara's history existed.
    let reader = db.user("nohist", "n0h1st").await;
    match server {
        Server::Postgres => {
            db.execute(&format!("GRANT SELECT ON t1 TO {}", reader.name))
                .await
        }
        _ => {
            db.execute(&format!(
                "GRANT SELECT ON {}.t1 TO '{}'@'%'",
                db.name, reader.name
            ))
            .await
        }
    }
    let url = reader.url(&db.url);
    for command in [&["status"][..], &["wait", "--timeout", "60s"], &["migrate"]] {
        let started = Instant::now();
        let (code, stdout, stderr) = run(&url, m.path(), command);
        let took = started.elapsed();
        assert_eq!(code, Some(1), "{command:?}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("Error [PERMISSION_DENIED]:")
                && stderr.contains("dirthara_migrations")
                && stderr.contains("GRANT SELECT")
                && stderr.contains(&reader.name),
            "{command:?}: {stderr}"
        );
        assert!(!stdout.contains("pending"), "{command:?}: {stdout}");
        assert!(!stderr.contains("n0h1st"), "{stderr}");
        // At once, not after the wait's timeout.
        assert!(took < Duration::from_secs(30), "{command:?} took {took:?}");
    }
    // Granted as the error says, the same role reads it.
    let grant = match server {
        Server::Postgres => format!(
            "GRANT SELECT ON dirthara_migrations, dirthara_migrations_meta TO {}",
            reader.name
        ),
        _ => format!("GRANT SELECT ON {}.* TO '{}'@'%'", db.name, reader.name),
    };
    db.execute(&grant).await;
    let (code, stdout, stderr) = run(&url, m.path(), &["status"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");

    if server == Server::Postgres {
        a_tenant_schema_the_role_may_not_use_is_told_so(&db, &reader, &m).await;
    }
}

/// PostgreSQL: a tenant schema created after the grants is left out of the role's
/// search_path without a word; its targets are `PERMISSION_DENIED`, not "2 pending".
async fn a_tenant_schema_the_role_may_not_use_is_told_so(
    db: &TestDb,
    reader: &support::servers::TestUser,
    m: &Migrations,
) {
    db.execute("CREATE SCHEMA tenant_1; CREATE SCHEMA tenant_2")
        .await;
    let (code, stdout, stderr) = run(&db.url, m.path(), &["--schemas", "tenant_*", "migrate"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    db.execute(&format!(
        "GRANT USAGE ON SCHEMA tenant_1 TO {0}; GRANT SELECT ON ALL TABLES IN SCHEMA tenant_1 \
         TO {0}",
        reader.name
    ))
    .await;
    let url = reader.url(&db.url);
    for command in [&["status"][..], &["wait", "--timeout", "60s"]] {
        let mut args = vec!["--schemas", "tenant_*"];
        args.extend_from_slice(command);
        let (code, stdout, stderr) = run(&url, m.path(), &args);
        assert_eq!(code, Some(1), "{args:?}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("[PERMISSION_DENIED]")
                && stderr.contains("no USAGE on the schema `tenant_2`")
                && stderr.contains(&format!(
                    "GRANT USAGE ON SCHEMA \"tenant_2\" TO \"{}\"",
                    reader.name
                )),
            "{args:?}: {stderr}"
        );
        assert!(
            !stdout.contains("behind") && !stdout.contains("2 pending"),
            "{args:?}: {stdout}"
        );
    }
}

/// A MongoDB-compatible server of this test's own, with authentication on, stopped on drop.
struct AuthServer {
    child: std::process::Child,
    port: u16,
    _data: tempfile::TempDir,
}

impl AuthServer {
    /// The test server (`DIRTHARA_TEST_SECANTUSD`, which CI sets) started without
    /// authentication to create `users` (name, password, roles on `shop`) and an `admin`
    /// root, then again with it. `None` when the binary is not given (outside CI).
    async fn start(users: &[(&str, &str, &[&str])]) -> Option<AuthServer> {
        let Ok(bin) = std::env::var("DIRTHARA_TEST_SECANTUSD") else {
            assert!(
                std::env::var("DIRTHARA_REQUIRE_SERVERS").as_deref() != Ok("1"),
                "DIRTHARA_TEST_SECANTUSD is unset; DIRTHARA_REQUIRE_SERVERS=1 requires it"
            );
            eprintln!("SKIPPED: DIRTHARA_TEST_SECANTUSD is unset");
            return None;
        };
        let data = scratch_dir();
        let port = support::pgbouncer::free_port();
        let spawn = |auth: bool| {
            let mut cmd = std::process::Command::new(&bin);
            cmd.args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--storage-path",
            ])
            .arg(data.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
            match auth {
                true => cmd.arg("--auth"),
                // The users must be on disk when this instance is killed.
                false => cmd.arg("--sync-on-commit"),
            };
            cmd.spawn().unwrap()
        };
        let url = format!("mongodb://127.0.0.1:{port}/admin?directConnection=true");
        let mut setup = spawn(false);
        let client = support::servers::mongo_client(&url).await.unwrap();
        let admin = client.database("admin");
        let ping = mongodb::bson::doc! { "ping": 1 };
        let started = Instant::now();
        while admin.run_command(ping.clone()).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no server on {port}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let root = mongodb::bson::doc! {
            "createUser": "root", "pwd": "r00tpw", "roles": [{ "role": "root", "db": "admin" }]
        };
        admin.run_command(root).await.unwrap();
        for (name, password, roles) in users {
            let roles: Vec<_> = (roles.iter())
                .map(|role| mongodb::bson::doc! { "role": *role, "db": "shop" })
                .collect();
            let user =
                mongodb::bson::doc! { "createUser": *name, "pwd": *password, "roles": roles };
            client.database("shop").run_command(user).await.unwrap();
        }
        drop(client);
        setup.kill().unwrap();
        setup.wait().unwrap();
        let server = AuthServer {
            child: spawn(true),
            port,
            _data: data,
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no server on {port}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Some(server)
    }

    fn url(&self, user: &str, password: &str) -> String {
        format!(
            "mongodb://{user}:{password}@127.0.0.1:{}/shop?directConnection=true&authSource=shop",
            self.port
        )
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// MongoDB: a user the server refuses an action on dirthara's collections is told so, with
/// the role grant that fixes it: one with no role at `status`, one that may only read at
/// `migrate` (its `status` works); granted as the error says, it migrates.
#[tokio::test]
async fn a_mongodb_user_without_the_rights_is_told_so_with_the_grant() {
    let users: [(&str, &str, &[&str]); 2] =
        [("nobody", "n0b0dy", &[]), ("reader", "r3ader", &["read"])];
    let Some(server) = AuthServer::start(&users).await else {
        return;
    };
    let m = scratch_dir();
    std::fs::write(m.path().join("1_users.json"), r#"[{"create": "users"}]"#).unwrap();
    let grant = |user: &str| {
        format!(
            "db.getSiblingDB(\"shop\").grantRolesToUser(\"{user}\", [{{ role: \"readWrite\", \
             db: \"shop\" }}])"
        )
    };
    let (code, stdout, stderr) = run(&server.url("nobody", "n0b0dy"), m.path(), &["status"]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(stderr.starts_with("Error [PERMISSION_DENIED]:"), "{stderr}");
    assert!(stderr.contains(&grant("nobody")), "{stderr}");
    assert!(
        !stdout.contains("pending") && !stderr.contains("n0b0dy"),
        "{stderr}"
    );

    let reader = server.url("reader", "r3ader");
    let (code, stdout, stderr) = run(&reader, m.path(), &["status"]);
    assert_eq!(code, Some(0), "may read: {stdout}\n{stderr}");
    let (code, stdout, stderr) = run(&reader, m.path(), &["migrate"]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(stderr.starts_with("Error [PERMISSION_DENIED]:"), "{stderr}");
    assert!(stderr.contains(&grant("reader")), "{stderr}");

    let root = format!(
        "mongodb://root:r00tpw@127.0.0.1:{}/admin?directConnection=true",
        server.port
    );
    let client = support::servers::mongo_client(&root).await.unwrap();
    let role = mongodb::bson::doc! { "role": "readWrite", "db": "shop" };
    let grant = mongodb::bson::doc! { "grantRolesToUser": "reader", "roles": [role] };
    client.database("shop").run_command(grant).await.unwrap();
    let (code, stdout, stderr) = run(&reader, m.path(), &["migrate"]);
    assert_eq!(code, Some(0), "granted: {stdout}\n{stderr}");
}
