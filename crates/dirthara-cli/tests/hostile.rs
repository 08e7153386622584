//! Hostile input through the binary: no error path prints a password (closed ports, wrong
//! passwords, malformed URLs, config files), a history table name that could splice SQL is
//! refused, a MongoDB lease whose expiry is any BSON type but a date is held, and every input
//! ends quickly: a NUL byte in a migration, a configuration file or `.env` that never ends,
//! a duration too long for any clock.

mod support;

use std::process::{Command, Output};
use std::time::Duration;

use support::servers::{Server, TestDb};
use support::{
    dirthara, dirthara_command, scratch_dir, spawn, text, wait_with_watchdog, Migrations,
};

/// Runs `cmd`, failing the test if it runs past `limit` (a hang is the bug).
fn run_within(cmd: Command, limit: Duration) -> (Option<i32>, String) {
    let out = wait_with_watchdog(spawn(cmd), limit);
    (out.status.code(), text(&out).1)
}

#[track_caller]
fn assert_config_error(code: Option<i32>, stderr: &str, needles: &[&str]) {
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.starts_with("Error [CONFIG_ERROR]: "), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
}

/// Regression (issue 22): `SELECT 1;\0` looped for ever at 97 % CPU on SQLite and left the
/// migration dirty on MariaDB. It is refused before any database is touched, on every one.
#[tokio::test(flavor = "multi_thread")]
async fn a_nul_byte_in_a_migration_file_is_refused_before_any_database_is_touched() {
    let m = Migrations::new();
    m.add(1, "fine", "SELECT 1;", None);
    std::fs::write(m.path().join("2_nul.up.sql"), "SELECT 1;\n\0").unwrap();
    let dir = scratch_dir();
    let sqlite = format!("sqlite:{}", dir.path().join("x.db").display());
    let mut urls = vec![(sqlite, None)];
    for server in [Server::Postgres, Server::Mysql] {
        if let Some(db) = TestDb::create(server).await {
            urls.push((db.url.clone(), Some(db)));
        }
    }
    for (url, db) in &urls {
        let args = ["migrate", "--locking", "lease"];
        let (code, stderr) = run_within(dirthara(url, m.path(), &args), Duration::from_secs(60));
        assert_eq!(code, Some(1), "{url}: {stderr}");
        assert!(
            stderr.starts_with("Error [INVALID_MIGRATION]: "),
            "{stderr}"
        );
        assert!(
            stderr.contains("2_nul.up.sql: holds a NUL byte at byte offset 10 (line 2)"),
            "{stderr}"
        );
        if let Some(db) = db {
            assert!(db.tables().await.is_empty(), "{url}: nothing was created");
        }
    }
    assert!(
        !dir.path().join("x.db").exists(),
        "the SQLite file was never created"
    );
}

/// Regression (issue 22): `--config /dev/zero` read 4.6 GB in 4 s. A configuration file or
/// `.env` is read up to its cap (1 MiB) and refused beyond it, naming it and the cap.
#[test]
fn a_config_file_or_dotenv_beyond_the_cap_is_refused_at_once() {
    let limit = Duration::from_secs(20);
    let dir = scratch_dir();
    std::fs::create_dir(dir.path().join("migrations")).unwrap();
    std::fs::write(
        dir.path().join("migrations/1_a.up.sql"),
        "CREATE TABLE a (id INT);",
    )
    .unwrap();
    let status = || {
        let mut cmd = dirthara_command();
        cmd.current_dir(dir.path())
            .args(["-d", "sqlite:x.db", "status"]);
        cmd
    };

    let mut cmd = status();
    cmd.args(["--config", "/dev/zero"]);
    let (code, stderr) = run_within(cmd, limit);
    assert_config_error(
        code,
        &stderr,
        &["config file /dev/zero", "larger than 1 MiB"],
    );

    // The default file, one byte over the cap (a comment, so only its size is wrong).
    let big = dir.path().join("dirthara.toml");
    std::fs::write(&big, vec![b'#'; 1024 * 1024 + 1]).unwrap();
    let (code, stderr) = run_within(status(), limit);
    assert_config_error(
        code,
        &stderr,
        &["config file dirthara.toml", "larger than 1 MiB"],
    );
    std::fs::write(&big, vec![b'#'; 1024 * 1024]).unwrap();
    let (code, stderr) = run_within(status(), limit);
    assert_eq!(code, Some(0), "up to the cap is fine: {stderr}");
    std::fs::remove_file(&big).unwrap();

    let dotenv = dir.path().join(".env");
    std::os::unix::fs::symlink("/dev/zero", &dotenv).unwrap();
    let (code, stderr) = run_within(status(), limit);
    assert_config_error(code, &stderr, &["cannot read .env", "larger than 1 MiB"]);
    std::fs::remove_file(&dotenv).unwrap();
    std::fs::write(&dotenv, "# comment\n".repeat(120_000)).unwrap();
    let (code, stderr) = run_within(status(), limit);
    assert_config_error(code, &stderr, &["cannot read .env", "larger than 1 MiB"]);
    assert!(!dir.path().join("x.db").exists());
}

/// Regression (issue 22): `--lock-wait 9223372036854775807` panicked (exit 101, "overflow
/// when adding duration to instant"), `--lock-ttl 99999999999999h` failed at lock time on
/// PostgreSQL and `--lock-ttl 18446743073709551` took an expired lease on MongoDB. Every
/// duration has a bound, the same from a flag, the environment and the file.
#[test]
fn a_duration_beyond_its_bound_is_a_config_error_from_flag_env_and_file() {
    let m = Migrations::tables(1);
    let dir = scratch_dir();
    let url = format!("sqlite:{}", dir.path().join("x.db").display());
    let limit = Duration::from_secs(20);
    let wait = [
        "a wait of more than 100 years",
        "maximum of 30 days",
        "`forever`",
    ];
    let lease = ["longer than the maximum of 7 days", "Use at most 7d"];
    for (args, origin, needles) in [
        (
            &["--lock-wait", "9223372036854775807"][..],
            "--lock-wait: ",
            &wait[..],
        ),
        (
            &["--lock-wait", "31d"],
            "--lock-wait: a wait of 1month 13h",
            &wait[1..],
        ),
        (
            &["--lock-ttl", "99999999999999h"],
            "--lock-ttl: a lease of",
            &lease[..],
        ),
        (
            &["--lock-ttl", "18446743073709551"],
            "--lock-ttl: ",
            &lease[..],
        ),
        (
            &["--connect-timeout", "99999d"],
            "--connect-timeout: ",
            &["30 days"][..],
        ),
    ] {
        let mut run = vec!["migrate", "--locking", "lease"];
        run.extend_from_slice(args);
        let (code, stderr) = run_within(dirthara(&url, m.path(), &run), limit);
        let mut expected = vec![origin];
        expected.extend_from_slice(needles);
        assert_config_error(code, &stderr, &expected);
    }
    // A MongoDB URL is refused the same way, before any connection is tried.
    let mongo = "mongodb://127.0.0.1:1/x?serverSelectionTimeoutMS=500";
    let args = ["migrate", "--lock-ttl", "18446743073709551"];
    let (code, stderr) = run_within(dirthara(mongo, m.path(), &args), limit);
    assert_config_error(code, &stderr, &["--lock-ttl: a lease of", "7 days"]);

    let mut cmd = dirthara(&url, m.path(), &["migrate", "--locking", "lease"]);
    cmd.env("DIRTHARA_LOCK_TTL", "8d");
    let (code, stderr) = run_within(cmd, limit);
    assert_config_error(
        code,
        &stderr,
        &["environment variable DIRTHARA_LOCK_TTL: a lease"],
    );

    let config = dir.path().join("dirthara.toml");
    std::fs::write(&config, "connect_timeout = \"999999999999999999999s\"\n").unwrap();
    let mut cmd = dirthara(&url, m.path(), &["migrate"]);
    cmd.arg("--config").arg(&config);
    let (code, stderr) = run_within(cmd, limit);
    assert_config_error(
        code,
        &stderr,
        &["dirthara.toml: `connect_timeout`: a connect timeout"],
    );
    assert!(!dir.path().join("x.db").exists(), "nothing was touched");

    // At the bounds: accepted (and `forever` stays a wait).
    let args = [
        "migrate",
        "--locking",
        "lease",
        "--lock-ttl",
        "7d",
        "--lock-wait",
        "30d",
        "--connect-timeout",
        "30d",
    ];
    let (code, stderr) = run_within(dirthara(&url, m.path(), &args), limit);
    assert_eq!(code, Some(0), "{stderr}");
    let args = ["migrate", "--locking", "lease", "--lock-wait", "forever"];
    let (code, stderr) = run_within(dirthara(&url, m.path(), &args), limit);
    assert_eq!(code, Some(0), "{stderr}");
}

fn assert_no_secret(output: &Output, what: &str) {
    let (stdout, stderr) = text(output);
    assert!(
        !stdout.contains("SECRET") && !stderr.contains("SECRET"),
        "{what} printed the password:\n{stdout}\n{stderr}"
    );
}

/// Every command that connects, in both output formats, against URLs that fail to connect:
/// closed ports, wrong passwords, passwords in the query, URLs a driver cannot parse.
#[test]
fn no_connection_error_prints_the_password() {
    let m = Migrations::tables(1);
    let urls = [
        "postgres://u:SECRET@127.0.0.1:1/x",
        "postgresql://u:SECRET@127.0.0.1:1/x?sslmode=disable",
        "postgres://u@127.0.0.1:1/x?password=SECRET",
        "postgres://u@127.0.0.1:1/x?passwor%64=SECRET",
        "postgres://u:SECRET@127.0.0.1:notaport/x",
        "postgres://u:SEC%2FRET@127.0.0.1:1/x",
        "mysql://root:SECRET@127.0.0.1:3306/mysql",
        "mysql://u:SECRET@127.0.0.1:1/x",
        "mysql://u:SECRET@127.0.0.1:notaport/x",
        "mariadb://u:SECRET@127.0.0.1:1/x",
        "mongodb://u:SECRET@127.0.0.1:1/x?serverSelectionTimeoutMS=500",
        "mongodb://u:SECRET@127.0.0.1:notaport/x",
        "mongodb://u:SECRET@127.0.0.1:27018/admin?directConnection=true&authSource=admin",
        "bogus://u:SECRET@127.0.0.1:1/x",
    ];
    // Most of these wait out their one-second connect timeout: one thread per URL, so the
    // test takes seconds, not a minute (each URL's commands still run one after another).
    std::thread::scope(|scope| {
        for url in urls {
            let dir = m.path();
            scope.spawn(move || {
                for args in [
                    &["status"][..],
                    &["status", "--output", "json"],
                    &["migrate", "--output", "json"],
                    &["unlock", "--force"],
                ] {
                    let mut args = args.to_vec();
                    args.extend_from_slice(&["--connect-timeout", "1s"]);
                    let out = dirthara(url, dir, &args).output().unwrap();
                    assert_no_secret(&out, &format!("{args:?} on {url}"));
                    // Connected by accident (a server that ignores the password) is fine;
                    // the point is what a failure says.
                    if !out.status.success() {
                        assert!(!text(&out).1.is_empty() || !text(&out).0.is_empty());
                    }
                }
            });
        }
    });
}

/// URLs no driver reads: the host forgotten (`postgres://u:SECRET`, so the password reads
/// as a port), a password with an unencoded `/`, the `//` left out, a secret given as the
/// URL. Drivers and servers quote such text back in their errors; none of it is printed.
#[test]
fn no_malformed_url_prints_the_password() {
    let sql = Migrations::tables(1);
    let json = Migrations::collections(1);
    let urls = [
        "postgres://u:SECRET",
        "postgres://u:SECRET/db",
        "postgres://u:SEC/RET@127.0.0.1:1/x",
        "postgres:SECRET",
        "mysql://root:SECRET",
        "mariadb://u:SEC?RET@127.0.0.1:1/x",
        "mongodb://u:SECRET",
        "mongodb+srv://u:SECRET",
        "mongodb://u:SEC/RET@127.0.0.1:1/x",
        "mongodb:SECRET",
        "SECRET",
        "SECRET:with-a-colon",
    ];
    for url in urls {
        let dir = match url.starts_with("mongodb") {
            true => json.path(),
            false => sql.path(),
        };
        for args in [
            &["status"][..],
            &["migrate", "--output", "json"],
            &["migrate", "--output", "ndjson"],
            &["unlock", "--force"],
        ] {
            let mut args = args.to_vec();
            args.extend_from_slice(&["--connect-timeout", "1s"]);
            let out = dirthara(url, dir, &args).output().unwrap();
            assert_no_secret(&out, &format!("{args:?} on {url}"));
            assert_eq!(out.status.code(), Some(1), "{url}: {:?}", text(&out));
        }
    }
}

#[test]
fn a_config_file_error_never_quotes_the_password() {
    let m = Migrations::tables(1);
    let config = m.path().join("dirthara.toml");
    std::fs::write(
        &config,
        "[connections]\ndefault = \"postgres://u:SECRET@127.0.0.1:1/x\" oops\n",
    )
    .unwrap();
    let out = dirthara_command()
        .arg("--config")
        .arg(&config)
        .arg("--dir")
        .arg(m.path())
        .arg("status")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).1.contains("dirthara.toml"), "{:?}", text(&out));
    assert_no_secret(&out, "a config syntax error");
}

#[test]
fn a_history_table_that_could_splice_sql_is_refused() {
    let dir = scratch_dir();
    let url = format!("sqlite:{}", dir.path().join("x.db").display());
    let m = Migrations::tables(1);
    for table in [
        "t\"; DROP TABLE t1; --",
        "t'",
        "t;x",
        "a b",
        "`t`",
        "1t",
        "",
    ] {
        let out = dirthara(&url, m.path(), &["migrate", "--history-table", table])
            .output()
            .unwrap();
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{table:?}: {stderr}");
        assert!(stderr.contains("history table name"), "{table:?}: {stderr}");
    }
    // Nothing was created: the file was never even written.
    assert!(!dir.path().join("x.db").exists());
}

/// `expiresAt` of every BSON type but a date: status and acquire treat the lease as held
/// (malformed, never stolen) until `unlock --force`.
#[tokio::test(flavor = "multi_thread")]
async fn a_mongodb_lease_expiry_of_any_non_date_bson_type_is_held() {
    use mongodb::bson::{
        doc, oid::ObjectId, spec::BinarySubtype, Binary, Bson, Decimal128, Document,
        JavaScriptCodeWithScope, Regex, Timestamp,
    };
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let m = Migrations::collections(1);
    let past = chrono_free_past();
    let expiries = [
        Bson::Double(0.0),
        Bson::Double(f64::NAN),
        Bson::String("1970-01-01T00:00:00Z".into()),
        Bson::Array(vec![Bson::DateTime(past)]),
        Bson::Document(doc! { "at": Bson::DateTime(past) }),
        Bson::Boolean(false),
        Bson::Null,
        Bson::RegularExpression(Regex {
            pattern: ".*".into(),
            options: String::new(),
        }),
        Bson::JavaScriptCode("0".into()),
        Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code: "0".into(),
            scope: doc! {},
        }),
        Bson::Int32(0),
        Bson::Int64(i64::MIN),
        Bson::Timestamp(Timestamp {
            time: 1,
            increment: 1,
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![0; 8],
        }),
        Bson::ObjectId(ObjectId::from_bytes([0; 12])),
        Bson::Symbol("past".into()),
        Bson::Decimal128(Decimal128::from_bytes([0; 16])),
        Bson::Undefined,
        Bson::MinKey,
        Bson::MaxKey,
    ];
    let locks = db
        .mongo()
        .await
        .collection::<Document>("dirthara_migrations_lock");
    for expiry in expiries {
        let lease = doc! { "_id": "dirthara:migrations", "ownerId": "old", "hostname": "h",
        "pid": 9_i64, "operation": "migrate", "expiresAt": expiry.clone() };
        if let Err(e) = locks.insert_one(lease).await {
            // A type the server refuses to store cannot be a lease either.
            eprintln!("the server refused expiresAt {expiry:?}: {e}");
            continue;
        }
        let out = dirthara(&db.url, m.path(), &["status", "--output", "json"])
            .output()
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{expiry:?}: {e}: {:?}", text(&out)));
        assert_eq!(status["lock"]["state"], "held", "{expiry:?}: {status}");
        assert_eq!(status["lock"]["malformed"], true, "{expiry:?}");
        let out = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
        assert!(
            text(&out).1.contains("Error [MIGRATION_LOCK_HELD]"),
            "{expiry:?} was taken: {:?}",
            text(&out)
        );
        let out = dirthara(&db.url, m.path(), &["unlock", "--force"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{:?}", text(&out));
        assert_eq!(locks.count_documents(doc! {}).await.unwrap(), 0);
    }
    // Untouched by all of that: the migration never ran.
    assert!(db.history().await.is_empty());
}

/// A date long past, for a date hidden inside another type.
fn chrono_free_past() -> mongodb::bson::DateTime {
    mongodb::bson::DateTime::from_millis(0)
}
