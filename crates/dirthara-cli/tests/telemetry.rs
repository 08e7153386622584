//! OpenTelemetry (issue 32, part 7), on PostgreSQL and MariaDB, against an OTLP/HTTP receiver
//! written here (a thread that keeps every request): with `OTEL_EXPORTER_OTLP_ENDPOINT` set, a
//! run sends its spans to `/v1/traces` and its counters to `/v1/metrics`, in the caller's
//! trace (`TRACEPARENT`), with the configured headers and service name. A span for the
//! command; under it one per migration (version, name, outcome), each table-lock wait that
//! gave way under its migration, the lock wait with its holder, and over a fleet one span per
//! target holding that target's migrations. A failed step is an error span and a count. With
//! no endpoint, or `OTEL_SDK_DISABLED=true`, nothing is sent; a receiver that is down is a
//! warning and the run's exit code is its own.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use sqlx::{Connection, Executor};
use support::servers::{Server, TestDb};
use support::{dirthara, scratch_dir, text, wait_until_held, Migrations};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Request {
    path: String,
    /// Header names lowercased.
    headers: Vec<(String, String)>,
    body: Value,
}

/// An OTLP/HTTP receiver on a free port that answers 200 to everything and keeps what it got.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Request>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&got);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                if let Some(request) = read_request(&mut stream) {
                    keep.lock().unwrap().push(request);
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
                      Connection: close\r\n\r\n{}",
                );
            }
        });
        Receiver { url, got }
    }

    fn requests(&self) -> Vec<Request> {
        self.got.lock().unwrap().clone()
    }

    /// The body sent to `path` (exactly one).
    fn body(&self, path: &str) -> Value {
        let matching: Vec<Request> = (self.requests().into_iter())
            .filter(|r| r.path == path)
            .collect();
        assert_eq!(matching.len(), 1, "requests to {path}: {matching:#?}");
        matching[0].body.clone()
    }

    /// Every span sent, in one list.
    fn spans(&self) -> Vec<Value> {
        let body = self.body("/v1/traces");
        let mut spans = Vec::new();
        for resource in body["resourceSpans"].as_array().unwrap() {
            for scope in resource["scopeSpans"].as_array().unwrap() {
                spans.extend(scope["spans"].as_array().unwrap().iter().cloned());
            }
        }
        spans
    }

    /// Each metric's data points, by name.
    fn metric(&self, name: &str) -> Vec<Value> {
        let body = self.body("/v1/metrics");
        let metrics = &body["resourceMetrics"][0]["scopeMetrics"][0]["metrics"];
        let metric = (metrics.as_array().unwrap().iter())
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no metric {name}: {metrics:#}"));
        metric["sum"]["dataPoints"].as_array().unwrap().clone()
    }

    /// The one data point of a counter, as a number.
    fn count(&self, name: &str) -> f64 {
        let points = self.metric(name);
        assert_eq!(points.len(), 1, "{name}: {points:#?}");
        number(&points[0])
    }
}

fn number(point: &Value) -> f64 {
    match (&point["asInt"], &point["asDouble"]) {
        (Value::String(n), _) => n.parse().unwrap(),
        (_, Value::Number(x)) => x.as_f64().unwrap(),
        _ => panic!("not a number point: {point}"),
    }
}

fn read_request(stream: &mut std::net::TcpStream) -> Option<Request> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize = (headers.iter())
        .find(|(name, _)| name == "content-length")?
        .1
        .parse()
        .ok()?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        path,
        headers,
        body: serde_json::from_slice(&body).ok()?,
    })
}

/// `cmd` exporting to `receiver`, in the caller's trace, with a header and a service name.
fn exporting<'a>(cmd: &'a mut Command, receiver: &Receiver) -> &'a mut Command {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k%3D1")
        .env("OTEL_SERVICE_NAME", "billing-migrations")
        .env("TRACEPARENT", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
}

fn attribute(span: &Value, key: &str) -> Value {
    let attributes = span["attributes"].as_array().unwrap();
    let found = attributes.iter().find(|a| a["key"] == key);
    match found.map(|a| &a["value"]) {
        Some(value) => match (
            &value["stringValue"],
            &value["intValue"],
            &value["boolValue"],
        ) {
            (Value::String(s), _, _) => Value::String(s.clone()),
            (_, Value::String(n), _) => Value::from(n.parse::<i64>().unwrap()),
            (_, _, Value::Bool(b)) => Value::Bool(*b),
            _ => panic!("an attribute of unexpected type: {value}"),
        },
        None => Value::Null,
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// The command's span: the one whose parent is the caller's.
fn root(spans: &[Value]) -> &Value {
    let roots = named(spans, "dirthara.command");
    assert_eq!(roots.len(), 1, "{spans:#?}");
    roots[0]
}

fn duration_ms(span: &Value) -> f64 {
    let at = |key: &str| span[key].as_str().unwrap().parse::<u128>().unwrap();
    (at("endTimeUnixNano") - at("startTimeUnixNano")) as f64 / 1e6
}

fn ok(out: &Output) {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
}

/// A transaction that read `users` and stays open for `hold`: the table lock a migration's
/// ALTER waits for.
async fn block_users(db: &TestDb, hold: Duration) -> tokio::task::JoinHandle<()> {
    let (url, server) = (db.url.clone(), db.server);
    let (ready, started) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        match server {
            Server::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
                c.execute("BEGIN; SELECT count(*) FROM users")
                    .await
                    .unwrap();
                ready.send(()).unwrap();
                tokio::time::sleep(hold).await;
                c.execute("COMMIT").await.unwrap();
            }
            _ => {
                let mut c = sqlx::MySqlConnection::connect(&url).await.unwrap();
                c.execute("START TRANSACTION").await.unwrap();
                c.execute("SELECT count(*) FROM users").await.unwrap();
                ready.send(()).unwrap();
                tokio::time::sleep(hold).await;
                c.execute("COMMIT").await.unwrap();
            }
        }
    });
    started.await.unwrap();
    task
}

/// Two migrations, the second waiting on a blocker until it gives way and is tried again:
/// every span in the caller's trace, the command's span the caller's child; the migrations
/// under it; the table-lock wait under the migration that waited, naming the table; the
/// counters; the headers and the service name.
async fn traces_and_metrics_reach_the_receiver_in_the_callers_trace(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    db.execute("CREATE TABLE users (id INT PRIMARY KEY)").await;
    let m = Migrations::new();
    m.add(1, "create_orders", "CREATE TABLE orders (id INT);", None);
    m.add(
        2,
        "add_email",
        "ALTER TABLE users ADD COLUMN email VARCHAR(100);",
        None,
    );
    let blocker = block_users(&db, Duration::from_millis(2500)).await;
    let receiver = Receiver::start();
    let mut cmd = dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", "300ms"],
    );
    let out = exporting(&mut cmd, &receiver).output().unwrap();
    blocker.await.unwrap();
    ok(&out);

    let traces = receiver.requests();
    let paths: Vec<&str> = traces.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/v1/traces", "/v1/metrics"]);
    for request in &traces {
        assert!(request
            .headers
            .contains(&("x-api-key".into(), "k=1".into())));
        assert!(request
            .headers
            .contains(&("content-type".into(), "application/json".into())));
    }
    let resource = &receiver.body("/v1/traces")["resourceSpans"][0]["resource"];
    assert_eq!(attribute(resource, "service.name"), "billing-migrations");

    let spans = receiver.spans();
    assert!(spans.iter().all(|s| s["traceId"] == TRACE_ID), "{spans:#?}");
    let command = root(&spans);
    assert_eq!(command["parentSpanId"], CALLER_SPAN);
    assert_eq!(attribute(command, "dirthara.command"), "migrate");
    assert!(command.get("status").is_none(), "{command}");
    let migrations = named(&spans, "dirthara.migration");
    let described: Vec<(Value, Value, Value)> = (migrations.iter())
        .map(|s| {
            assert_eq!(s["parentSpanId"], command["spanId"]);
            (
                attribute(s, "dirthara.migration.version"),
                attribute(s, "dirthara.migration.name"),
                attribute(s, "dirthara.outcome"),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            (1.into(), "create_orders".into(), "applied".into()),
            (2.into(), "add_email".into(), "applied".into()),
        ]
    );
    let waits = named(&spans, "dirthara.table_lock.wait");
    assert!(!waits.is_empty(), "no table-lock wait span: {spans:#?}");
    for wait in &waits {
        assert_eq!(wait["parentSpanId"], migrations[1]["spanId"], "{wait}");
        assert_eq!(attribute(wait, "dirthara.table"), "users", "{wait}");
        assert!(duration_ms(wait) >= 250.0, "{wait}");
    }
    assert_eq!(receiver.count("dirthara.migrations.applied"), 2.0);
    assert_eq!(receiver.count("dirthara.migrations.failed"), 0.0);
    assert_eq!(
        receiver.count("dirthara.migrations.retried"),
        waits.len() as f64
    );
    assert!(receiver.count("dirthara.table_lock.wait") >= 0.25);
}

/// A second runner waits for the first's lock: its lock-wait span names the holder, and the
/// wait is counted.
async fn the_lock_wait_span_names_the_holder(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let sleep = match server {
        Server::Postgres => "SELECT pg_sleep(2);",
        _ => "SELECT SLEEP(2);",
    };
    let m = Migrations::new();
    m.add(1, "slow", sleep, None);
    let first = dirthara(&db.url, m.path(), &["migrate"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_held(|| dirthara(&db.url, m.path(), &["unlock", "--output", "json"]));
    let receiver = Receiver::start();
    let mut cmd = dirthara(&db.url, m.path(), &["migrate"]);
    let out = exporting(&mut cmd, &receiver).output().unwrap();
    ok(&first.wait_with_output().unwrap());
    ok(&out);
    let spans = receiver.spans();
    let waits = named(&spans, "dirthara.lock.wait");
    assert_eq!(waits.len(), 1, "{spans:#?}");
    let wait = waits[0];
    assert_eq!(wait["parentSpanId"], root(&spans)["spanId"]);
    let holder = attribute(wait, "dirthara.lock.holder");
    let session = attribute(wait, "dirthara.lock.holder.session_id");
    assert!(session.is_i64(), "{wait:#}");
    assert!(
        (holder.as_str().unwrap()).contains(&format!("session {session}")),
        "{wait:#}"
    );
    // PostgreSQL knows the holder's application_name (MariaDB only what it runs, which
    // changes as it goes).
    if server == Server::Postgres {
        let application = attribute(wait, "dirthara.lock.holder.application");
        assert!(
            application
                .as_str()
                .unwrap()
                .starts_with("dirthara migrate"),
            "{wait:#}"
        );
    }
    assert!(duration_ms(wait) >= 200.0, "{wait:#}");
    assert!(
        named(&spans, "dirthara.migration").is_empty(),
        "nothing left to do"
    );
    assert!(receiver.count("dirthara.lock.wait") >= 0.2);
}

/// A step that fails: its span and the command's are errors with the code, and it is counted.
async fn a_failed_migration_is_an_error_span_and_counted(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "create_orders", "CREATE TABLE orders (id INT);", None);
    m.add(2, "broken", "CREATE TABLE broken (id INT;", None);
    let receiver = Receiver::start();
    let mut cmd = dirthara(&db.url, m.path(), &["migrate"]);
    let out = exporting(&mut cmd, &receiver).output().unwrap();
    assert!(!out.status.success(), "{:?}", text(&out));
    let spans = receiver.spans();
    let command = root(&spans);
    assert_eq!(command["status"]["code"], 2, "{command:#}");
    let message = command["status"]["message"].as_str().unwrap();
    assert!(message.starts_with("MIGRATION_FAILED: "), "{message}");
    assert_eq!(attribute(command, "error.type"), "MIGRATION_FAILED");
    let migrations = named(&spans, "dirthara.migration");
    let outcomes: Vec<(Value, bool)> = (migrations.iter())
        .map(|s| (attribute(s, "dirthara.outcome"), s.get("status").is_some()))
        .collect();
    assert_eq!(
        outcomes,
        [("applied".into(), false), ("failed".into(), true)]
    );
    assert_eq!(receiver.count("dirthara.migrations.applied"), 1.0);
    assert_eq!(receiver.count("dirthara.migrations.failed"), 1.0);
}

/// Over a fleet of two targets, one span per target under the command's, each holding its
/// own migration's span, and the targets counted by outcome.
async fn each_fleet_target_is_a_span_with_its_migrations(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "create_orders", "CREATE TABLE orders (id INT);", None);
    let mut tenants = Vec::new();
    let mut siblings = Vec::new();
    let selection = match server {
        Server::Postgres => {
            db.execute("CREATE SCHEMA tenant_1; CREATE SCHEMA tenant_2")
                .await;
            tenants.extend(["tenant_1".to_string(), "tenant_2".to_string()]);
            vec!["--schemas".to_string(), "tenant_*".to_string()]
        }
        _ => {
            for i in 1..=2 {
                let sibling = db.sibling(&format!("tenant_{i}")).await;
                tenants.push(sibling.name.clone());
                siblings.push(sibling);
            }
            vec!["--databases".to_string(), format!("{}_tenant_*", db.name)]
        }
    };
    let receiver = Receiver::start();
    let mut args: Vec<&str> = selection.iter().map(String::as_str).collect();
    args.push("migrate");
    let mut cmd = dirthara(&db.url, m.path(), &args);
    ok(&exporting(&mut cmd, &receiver).output().unwrap());
    let spans = receiver.spans();
    let command = root(&spans);
    let targets = named(&spans, "dirthara.target");
    let mut names: Vec<String> = (targets.iter())
        .map(|t| {
            assert_eq!(t["parentSpanId"], command["spanId"]);
            assert_eq!(attribute(t, "dirthara.outcome"), "applied");
            let under: Vec<_> = named(&spans, "dirthara.migration")
                .into_iter()
                .filter(|s| s["parentSpanId"] == t["spanId"])
                .collect();
            assert_eq!(under.len(), 1, "{t:#}");
            attribute(t, "dirthara.target")
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    names.sort();
    assert_eq!(names, tenants);
    let by_outcome = receiver.metric("dirthara.fleet.targets");
    assert_eq!(by_outcome.len(), 1, "{by_outcome:#?}");
    assert_eq!(attribute(&by_outcome[0], "dirthara.outcome"), "applied");
    assert_eq!(number(&by_outcome[0]), 2.0);
    assert_eq!(receiver.count("dirthara.migrations.applied"), 2.0);
    drop(siblings);
}

crate::scenario_tests! {
    postgres => Server::Postgres => [
        traces_and_metrics_reach_the_receiver_in_the_callers_trace,
        the_lock_wait_span_names_the_holder,
        a_failed_migration_is_an_error_span_and_counted,
        each_fleet_target_is_a_span_with_its_migrations,
    ],
    mariadb => Server::Mysql => [
        traces_and_metrics_reach_the_receiver_in_the_callers_trace,
        the_lock_wait_span_names_the_holder,
        a_failed_migration_is_an_error_span_and_counted,
        each_fleet_target_is_a_span_with_its_migrations,
    ],
}

fn sqlite_run(dir: &Path, m: &Migrations) -> Command {
    let url = format!("sqlite:{}", dir.join("app.db").display());
    dirthara(&url, m.path(), &["--no-lock", "migrate"])
}

/// Without an endpoint nothing is sent, whatever else is set; `OTEL_SDK_DISABLED=true`
/// switches an endpoint off.
#[test]
fn nothing_is_sent_without_an_endpoint_or_when_disabled() {
    let m = Migrations::new();
    m.add(1, "create_orders", "CREATE TABLE orders (id INT);", None);
    let receiver = Receiver::start();
    let dir = scratch_dir();
    let out = sqlite_run(dir.path(), &m)
        .env("OTEL_SERVICE_NAME", "x")
        .env("TRACEPARENT", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
        .output()
        .unwrap();
    ok(&out);
    let dir = scratch_dir();
    let out = sqlite_run(dir.path(), &m)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_SDK_DISABLED", "true")
        .output()
        .unwrap();
    ok(&out);
    assert!(!text(&out).1.contains("OpenTelemetry"), "{:?}", text(&out));
    std::thread::sleep(Duration::from_millis(100));
    assert!(receiver.requests().is_empty(), "{:?}", receiver.requests());
}

/// A receiver that is not there: a warning naming where it was sent and why, and the run's
/// own result and exit code.
#[test]
fn a_receiver_that_is_down_is_a_warning_not_a_failure() {
    let m = Migrations::new();
    m.add(1, "create_orders", "CREATE TABLE orders (id INT);", None);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = scratch_dir();
    let out = sqlite_run(dir.path(), &m)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
        .output()
        .unwrap();
    ok(&out);
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("create_orders"), "{stdout}");
    for signal in ["traces", "metrics"] {
        let said = format!(
            "warning: OpenTelemetry: the {signal} of this run were not exported to \
             http://127.0.0.1:{port}/v1/{signal}: cannot connect"
        );
        assert!(stderr.contains(&said), "{stderr}");
    }
}

/// An https receiver (Python's, with a certificate of a private CA made for the test by
/// `openssl`): with the CA trusted by `OTEL_EXPORTER_OTLP_CERTIFICATE` both signals reach it
/// over TLS;
/// without, the run warns that the peer is not trusted and succeeds all the same.
#[test]
fn an_https_receiver_is_sent_to_over_tls_trusting_the_certificate_given() {
    let m = Migrations::new();
    m.add(1, "create_orders", "CREATE TABLE orders (id INT);", None);
    let tls = scratch_dir();
    let file = |name: &str| tls.path().join(name);
    let (ca, cert, key) = (file("ca.pem"), file("cert.pem"), file("key.pem"));
    // A private CA, and the receiver's certificate signed by it (webpki takes no self-signed
    // CA as a server's own certificate).
    let openssl = |args: &[&str]| {
        let made = Command::new("openssl")
            .current_dir(tls.path())
            .args(args)
            .output()
            .expect("openssl makes the test's certificates");
        assert!(made.status.success(), "{args:?}: {:?}", text(&made));
    };
    openssl(
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ]
        .iter()
        .chain(&[
            "-subj",
            "/CN=dirthara test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ])
        .copied()
        .collect::<Vec<_>>(),
    );
    openssl(
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
        ]
        .iter()
        .chain(&["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .chain(&["-keyout", "key.pem", "-out", "cert.csr"])
        .copied()
        .collect::<Vec<_>>(),
    );
    openssl(
        &[
            "x509", "-req", "-in", "cert.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        ]
        .iter()
        .chain(&["-CAcreateserial", "-days", "1", "-copy_extensions", "copy"])
        .chain(&["-out", "cert.pem"])
        .copied()
        .collect::<Vec<_>>(),
    );
    let received = tls.path().join("received");
    std::fs::create_dir(&received).unwrap();
    let port_file = tls.path().join("port");
    let script = r#"
import http.server, os, ssl, sys
port_file, received, cert, key = sys.argv[1:5]
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        name = self.path.strip("/").replace("/", "_")
        with open(os.path.join(received, name + ".json"), "wb") as f:
            f.write(body)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
"#;
    let mut python = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args([&port_file, &received, &cert, &key])
        .spawn()
        .expect("python3 runs the test's https receiver");
    let started = std::time::Instant::now();
    let port = loop {
        if let Ok(port) = std::fs::read_to_string(&port_file) {
            break port;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no https receiver"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let endpoint = format!("https://localhost:{port}");
    let dir = scratch_dir();
    let trusted = sqlite_run(dir.path(), &m)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)
        .output()
        .unwrap();
    let dir = scratch_dir();
    let untrusted = sqlite_run(dir.path(), &m)
        .env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{endpoint}/v1/traces"),
        )
        .env("OTEL_METRICS_EXPORTER", "none")
        .output()
        .unwrap();
    let _ = python.kill();
    let _ = python.wait();
    ok(&trusted);
    assert!(
        !text(&trusted).1.contains("OpenTelemetry"),
        "{:?}",
        text(&trusted)
    );
    let traces = std::fs::read_to_string(received.join("v1_traces.json")).unwrap();
    assert!(traces.contains("dirthara.command"), "{traces}");
    assert!(received.join("v1_metrics.json").exists());
    ok(&untrusted);
    let (_, stderr) = text(&untrusted);
    assert!(
        stderr.contains(&format!(
            "warning: OpenTelemetry: the traces of this run were not exported to \
             {endpoint}/v1/traces:"
        )) && stderr.contains("UnknownIssuer"),
        "{stderr}"
    );
}
