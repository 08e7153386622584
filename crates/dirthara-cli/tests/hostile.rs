//! Hostile input through the binary: no error path prints a password (closed ports, wrong
//! passwords, malformed URLs, config files), a history table name that could splice SQL is
//! refused, and a MongoDB lease whose expiry is any BSON type but a date is held.

mod support;

use std::process::Output;

use support::servers::{Server, TestDb};
use support::{dirthara, dirthara_command, scratch_dir, text, Migrations};

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
    for url in urls {
        for args in [
            &["status"][..],
            &["status", "--output", "json"],
            &["migrate", "--output", "json"],
            &["unlock", "--force"],
        ] {
            let mut args = args.to_vec();
            args.extend_from_slice(&["--connect-timeout", "1s"]);
            let out = dirthara(url, m.path(), &args).output().unwrap();
            assert_no_secret(&out, &format!("{args:?} on {url}"));
            // Connected by accident (a server that ignores the password) is fine; the
            // point is what a failure says.
            if !out.status.success() {
                assert!(!text(&out).1.is_empty() || !text(&out).0.is_empty());
            }
        }
    }
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
