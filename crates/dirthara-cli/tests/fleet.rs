//! Fleets against the real servers, PostgreSQL and MariaDB: every tenant schema or database in
//! one command, each under its own lock; targets from a file, standard input, a query or
//! `dirthara.toml`; the canary, `--max-failures` and `--keep-going`; an unreachable target;
//! two runners sharing one fleet, one of them coming back to a target it found locked, and a
//! runner killed outright; shards; `wait`; a signal; JSON and ndjson reports, with no password
//! ever printed and no key twice in an event.
//!
//! A test that holds a migration at a point of its own uses a [`Gates`]: a lock the test holds
//! and the migration's statement asks for, so what runs where at that moment is known, not
//! timed.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use sqlx::{Connection, Executor, MySqlConnection, PgConnection};
use support::servers::{Server, TestDb};
use support::watch::{Ended, Watched};
use support::{dirthara, scratch_dir, spawn, text, wait_with_watchdog, Migrations};

crate::scenario_tests! {
    postgres => Server::Postgres => [
        every_database_matching_the_pattern_is_a_target,
        a_canary_found_locked_is_run_once_when_its_lock_is_free_and_reported_whole,
        a_fleet_with_dirty_targets_recovers_in_one_resolve_and_one_migrate,
        without_a_terminal_a_fleet_prints_only_the_targets_that_failed_and_the_totals,
        a_targets_file_standard_input_and_a_targets_query_name_their_targets_and_no_password_is_printed,
        a_failed_canary_starts_nothing_else,
        max_failures_stops_the_starting_and_keep_going_never_does,
        an_unreachable_target_fails_with_connection_error_while_the_others_proceed,
        two_fleet_runners_share_the_work_and_one_comes_back_to_the_target_it_found_locked,
        a_fleet_runner_killed_outright_leaves_what_the_design_says_and_a_rerun_finishes_the_rest,
        shards_split_a_fleet_between_runners_without_overlap,
        wait_returns_once_migrated_and_fails_clearly_on_timeout_dirt_or_a_newer_database_under_strict,
        wait_over_a_fleet_waits_for_every_target,
        wait_needs_only_the_right_to_read_the_history,
    ],
    mariadb => Server::Mysql => [
        every_database_matching_the_pattern_is_a_target,
        a_canary_found_locked_is_run_once_when_its_lock_is_free_and_reported_whole,
        a_fleet_with_dirty_targets_recovers_in_one_resolve_and_one_migrate,
        without_a_terminal_a_fleet_prints_only_the_targets_that_failed_and_the_totals,
        a_targets_file_standard_input_and_a_targets_query_name_their_targets_and_no_password_is_printed,
        a_failed_canary_starts_nothing_else,
        max_failures_stops_the_starting_and_keep_going_never_does,
        an_unreachable_target_fails_with_connection_error_while_the_others_proceed,
        two_fleet_runners_share_the_work_and_one_comes_back_to_the_target_it_found_locked,
        a_fleet_runner_killed_outright_leaves_what_the_design_says_and_a_rerun_finishes_the_rest,
        shards_split_a_fleet_between_runners_without_overlap,
        wait_returns_once_migrated_and_fails_clearly_on_timeout_dirt_or_a_newer_database_under_strict,
        wait_over_a_fleet_waits_for_every_target,
        wait_needs_only_the_right_to_read_the_history,
    ],
}

// ---------------------------------------------------------------------------------------
// Tenants, their effects, gates
// ---------------------------------------------------------------------------------------

/// How a fleet's tenants are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// PostgreSQL schemas `tenant_1` ..= `tenant_n` of the test database (and `other`, which
    /// no glob of these tests matches), selected with `--schemas 'tenant_*'`.
    Schemas,
    /// Databases `<test database>_tenant_1` ..= `_n` beside the test database, selected with
    /// `--databases '<test database>_tenant_*'`.
    Databases,
}

/// A fleet of tenants, and the place where every migration counts itself (`effects`: in the
/// test database, or on PostgreSQL, where a statement cannot reach another database, in each
/// tenant database).
struct Tenants {
    kind: Kind,
    /// The `default` connection's database.
    db: TestDb,
    /// [`Kind::Databases`]: tenant `i` is `databases[i - 1]`.
    databases: Vec<TestDb>,
    n: usize,
}

impl Tenants {
    /// `n` tenants as a fleet on `server` usually keeps them: PostgreSQL's schemas, MariaDB's
    /// databases.
    async fn new(server: Server, n: usize) -> Option<Tenants> {
        match server {
            Server::Postgres => Tenants::create(server, Kind::Schemas, n).await,
            _ => Tenants::create(server, Kind::Databases, n).await,
        }
    }

    /// `n` tenant databases on `server`.
    async fn databases(server: Server, n: usize) -> Option<Tenants> {
        Tenants::create(server, Kind::Databases, n).await
    }

    async fn create(server: Server, kind: Kind, n: usize) -> Option<Tenants> {
        let db = TestDb::create(server).await?;
        let mut databases = Vec::new();
        match (kind, server) {
            (Kind::Schemas, _) => {
                let schemas: String = (1..=n)
                    .map(|i| format!("CREATE SCHEMA tenant_{i}; "))
                    .collect();
                db.execute(&format!(
                    "{schemas}CREATE SCHEMA other; \
                     CREATE TABLE public.effects (schema_name text, version int)"
                ))
                .await;
            }
            (Kind::Databases, Server::Postgres) => {
                for i in 1..=n {
                    let tenant = db.sibling(&format!("tenant_{i}")).await;
                    tenant
                        .execute("CREATE TABLE public.effects (schema_name text, version int)")
                        .await;
                    databases.push(tenant);
                }
            }
            (Kind::Databases, _) => {
                db.execute("CREATE TABLE effects (schema_name VARCHAR(64), version INT)")
                    .await;
                for i in 1..=n {
                    databases.push(db.sibling(&format!("tenant_{i}")).await);
                }
            }
        }
        Some(Tenants {
            kind,
            db,
            databases,
            n,
        })
    }

    fn server(&self) -> Server {
        self.db.server
    }

    /// Tenant `i`'s name in reports and events (its schema's or its database's).
    fn name(&self, i: usize) -> String {
        match self.kind {
            Kind::Schemas => format!("tenant_{i}"),
            Kind::Databases => self.databases[i - 1].name.clone(),
        }
    }

    fn names(&self) -> Vec<String> {
        (1..=self.n).map(|i| self.name(i)).collect()
    }

    /// Tenant `i`'s URL ([`Kind::Databases`]).
    fn url(&self, i: usize) -> &str {
        &self.databases[i - 1].url
    }

    /// `dirthara` over this fleet (the flag that selects every tenant, then `args`).
    fn fleet(&self, m: &Migrations, args: &[&str]) -> Command {
        let pattern = format!("{}_tenant_*", self.db.name);
        let mut all = match self.kind {
            Kind::Schemas => vec!["--schemas", "tenant_*"],
            Kind::Databases => vec!["--databases", pattern.as_str()],
        };
        all.extend(args);
        dirthara(&self.db.url, m.path(), &all)
    }

    /// SQL that names the tenant a migration runs on, as `effects` records it.
    fn here(&self) -> &'static str {
        match (self.kind, self.server()) {
            (Kind::Schemas, _) => "current_schema()",
            (Kind::Databases, Server::Postgres) => "current_database()",
            _ => "DATABASE()",
        }
    }

    /// A statement that counts migration `v` as having taken effect where it runs.
    fn effect(&self, v: i64) -> String {
        let table = match self.server() {
            Server::Postgres => "public.effects".to_string(),
            _ => format!("{}.effects", self.db.name),
        };
        format!("INSERT INTO {table} VALUES ({}, {v})", self.here())
    }

    /// Migrations that create a table where they run (unqualified, so in the target's schema
    /// or database) and count themselves, each taking `seconds`.
    fn counted(&self, versions: std::ops::RangeInclusive<i64>, seconds: f64) -> Migrations {
        let m = Migrations::new();
        for v in versions {
            let up = format!(
                "CREATE TABLE t{v} (id INT);\n{};\n{};",
                self.effect(v),
                self.server().sleep(seconds)
            );
            m.add(v, &format!("t{v}"), &up, Some(&format!("DROP TABLE t{v};")));
        }
        m
    }

    /// How many times each (tenant, version) took effect.
    async fn effects(&self) -> BTreeMap<(String, i32), i64> {
        let sql = match self.server() {
            Server::Postgres => {
                "SELECT schema_name || ' ' || version || ' ' || count(*) FROM public.effects \
                 GROUP BY schema_name, version"
            }
            _ => {
                "SELECT CONCAT(schema_name, ' ', version, ' ', COUNT(*)) FROM effects \
                 GROUP BY schema_name, version"
            }
        };
        let places: Vec<&TestDb> = match (self.kind, self.server()) {
            (Kind::Databases, Server::Postgres) => self.databases.iter().collect(),
            _ => vec![&self.db],
        };
        let mut found = BTreeMap::new();
        for place in places {
            for line in place.strings(sql).await {
                let words: Vec<&str> = line.split(' ').collect();
                let key = (words[0].to_string(), words[1].parse().unwrap());
                found.insert(key, words[2].parse().unwrap());
            }
        }
        found
    }

    /// Makes tenant `i` fail its first migration: the table it creates is already there.
    async fn break_tenant(&self, i: usize) {
        self.break_tenant_at(i, 1).await
    }

    /// Makes tenant `i` fail [`Tenants::counted`]'s migration `v`.
    async fn break_tenant_at(&self, i: usize, v: i64) {
        match self.kind {
            Kind::Schemas => {
                (self.db)
                    .execute(&format!("CREATE TABLE tenant_{i}.t{v} (id INT)"))
                    .await
            }
            Kind::Databases => {
                self.databases[i - 1]
                    .execute(&format!("CREATE TABLE t{v} (id INT)"))
                    .await
            }
        }
    }

    /// Tenant `i`'s history: (version, state).
    async fn history(&self, i: usize) -> Vec<(i64, String)> {
        match self.kind {
            Kind::Schemas => {
                let table = format!("tenant_{i}.dirthara_migrations");
                (self.db.strings(&format!(
                    "SELECT version || ' ' || state FROM {table} ORDER BY version"
                )))
                .await
                .into_iter()
                .map(|line| {
                    let (version, state) = line.split_once(' ').unwrap();
                    (version.parse().unwrap(), state.to_string())
                })
                .collect()
            }
            Kind::Databases => (self.databases[i - 1].history().await.into_iter())
                .map(|(version, _, state)| (version, state))
                .collect(),
        }
    }
}

/// Every one of `names` with `outcome`.
fn all(names: &[String], outcome: &str) -> BTreeMap<String, String> {
    (names.iter())
        .map(|n| (n.clone(), outcome.to_string()))
        .collect()
}

/// Every (name, version) of `names` and `versions`, `count` times each.
fn every(
    names: &[String],
    versions: std::ops::RangeInclusive<i32>,
    count: i64,
) -> BTreeMap<(String, i32), i64> {
    (names.iter())
        .flat_map(|n| versions.clone().map(move |v| ((n.clone(), v), count)))
        .collect()
}

/// Points a migration waits at until the test opens them: locks the test holds, numbered,
/// that a migration's statement asks for. PostgreSQL: advisory locks of the two-key form
/// (class 7) in the test database; MariaDB: named locks `<test database>_gate_<n>`.
struct Gates {
    server: Server,
    prefix: String,
    session: Session,
}

enum Session {
    Pg(PgConnection),
    My(MySqlConnection),
}

impl Gates {
    /// The gates `numbers`, closed, on `db`'s server (PostgreSQL: for migrations running in
    /// `db`).
    async fn closed(db: &TestDb, numbers: &[u32]) -> Gates {
        let session = match db.server {
            Server::Postgres => Session::Pg(PgConnection::connect(&db.url).await.unwrap()),
            _ => Session::My(MySqlConnection::connect(&db.url).await.unwrap()),
        };
        let mut gates = Gates {
            server: db.server,
            prefix: db.name.clone(),
            session,
        };
        for &n in numbers {
            let take = match db.server {
                Server::Postgres => format!("SELECT pg_advisory_lock(7, {n})"),
                _ => format!("DO GET_LOCK('{}', 0)", gates.name(n)),
            };
            gates.run(&take).await;
        }
        gates
    }

    fn name(&self, n: u32) -> String {
        format!("{}_gate_{n}", self.prefix)
    }

    /// Statements that wait at gate `n` where `condition` holds, and go on once it is open.
    fn wait_at(&self, n: u32, condition: &str) -> String {
        match self.server {
            Server::Postgres => format!("SELECT pg_advisory_xact_lock(7, {n}) WHERE {condition}"),
            _ => format!(
                "SELECT GET_LOCK('{gate}', 600) FROM DUAL WHERE {condition};\n\
                 DO RELEASE_LOCK('{gate}')",
                gate = self.name(n)
            ),
        }
    }

    async fn open(&mut self, n: u32) {
        let release = match self.server {
            Server::Postgres => format!("SELECT pg_advisory_unlock(7, {n})"),
            _ => format!("DO RELEASE_LOCK('{}')", self.name(n)),
        };
        self.run(&release).await;
    }

    /// How many sessions wait at one of these gates.
    async fn waiting(&self, db: &TestDb) -> usize {
        let sql = match self.server {
            Server::Postgres => "SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' \
                 AND NOT granted AND classid = 7 AND objsubid = 2 AND database = \
                 (SELECT oid FROM pg_database WHERE datname = current_database())"
                .to_string(),
            _ => format!(
                "SELECT CAST(COUNT(*) AS CHAR) FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE '%GET_LOCK(''{}_gate_%' AND ID <> CONNECTION_ID()",
                self.prefix
            ),
        };
        db.strings(&sql).await[0].parse().unwrap()
    }

    async fn run(&mut self, sql: &str) {
        match &mut self.session {
            Session::Pg(c) => c.execute(sql).await.map(drop),
            Session::My(c) => c.execute(sql).await.map(drop),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// Waits until `done` holds, failing after a minute (something that should have happened
/// did not: a deadlock, or a lock that blocks what it must not). Not a timing assertion.
async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < Duration::from_secs(60), "never: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Reports
// ---------------------------------------------------------------------------------------

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {:?}", text(output)))
}

/// The events of an `--output ndjson` run, each line checked to be one JSON object with no
/// key twice (serde_json would silently keep the last of two).
fn ndjson(stdout: &str) -> Vec<Value> {
    stdout.lines().map(event).collect()
}

fn event(line: &str) -> Value {
    if let Err(e) = serde_json::from_str::<UniqueKeys>(line) {
        panic!("not one JSON object with unique keys ({e}): {line}");
    }
    serde_json::from_str(line).unwrap()
}

/// The `result` event: the command's document (a fleet's report, printed whether every
/// target succeeded or not; when one did not, an `error` event follows it).
fn result_of(events: &[Value]) -> &Value {
    (events.iter().rev())
        .find(|e| e["event"] == "result")
        .unwrap_or_else(|| panic!("no result: {events:?}"))
}

/// Any JSON value, read only to check that no object in it has a key twice.
struct UniqueKeys;

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key.clone()) {
                return Err(A::Error::custom(format!("the key `{key}` twice")));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }
}

/// Each target's outcome, by name.
fn outcomes(report: &Value) -> BTreeMap<String, String> {
    let targets = report["targets"].as_array();
    (targets
        .unwrap_or_else(|| panic!("no targets: {report}"))
        .iter())
    .map(|t| {
        (
            t["name"].as_str().unwrap().to_string(),
            t["outcome"].as_str().unwrap().to_string(),
        )
    })
    .collect()
}

/// The target named `name` in a report.
fn target<'a>(report: &'a Value, name: &str) -> &'a Value {
    (report["targets"].as_array().unwrap().iter())
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no target {name}: {report}"))
}

/// How many migrations each target of these reports applied, between them.
fn applied_by_target(reports: &[&Value]) -> BTreeMap<String, usize> {
    let mut applied = BTreeMap::new();
    for report in reports {
        for t in report["targets"].as_array().unwrap() {
            *applied
                .entry(t["name"].as_str().unwrap().to_string())
                .or_insert(0) += t["applied"].as_array().map_or(0, Vec::len);
        }
    }
    applied
}

/// Runs `cmd` with `input` on its standard input.
fn with_stdin(mut cmd: Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    wait_with_watchdog(child, Duration::from_secs(120))
}

// ---------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn every_tenant_schema_is_migrated_in_its_own_schema_once_and_reported() {
    let Some(t) = Tenants::new(Server::Postgres, 6).await else {
        return;
    };
    let m = t.counted(1..=3, 0.0);
    let run = t
        .fleet(&m, &["--jobs", "3", "migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    let report = json(&run);
    assert_eq!(outcomes(&report), all(&t.names(), "applied"), "{report}");
    assert_eq!(report["totals"]["migrations_applied"], 18, "{report}");
    // Each once, in its own schema; none in `other` or `public`.
    assert_eq!(t.effects().await, every(&t.names(), 1..=3, 1));
    // Each schema has its own history (and the migrations' tables), public none.
    let tables = t.db
        .strings("SELECT schemaname || '.' || tablename FROM pg_tables WHERE tablename LIKE 't_' OR tablename = 'dirthara_migrations' ORDER BY 1")
        .await;
    assert_eq!(tables.len(), 6 * 4, "{tables:?}");
    assert!(
        tables.iter().all(|t| t.starts_with("tenant_")),
        "{tables:?}"
    );

    // Again: nothing to do anywhere. Then where the fleet stands.
    let again = t
        .fleet(&m, &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{:?}", text(&again));
    assert!(outcomes(&json(&again)).values().all(|o| o == "up_to_date"));
    m.add(4, "t4", "CREATE TABLE t4 (id INT)", None);
    let one = dirthara(&t.db.url, m.path(), &["--schemas", "tenant_1", "migrate"])
        .output()
        .unwrap();
    assert!(one.status.success(), "{:?}", text(&one));
    let status = t.fleet(&m, &["status"]).output().unwrap();
    assert!(status.status.success(), "{:?}", text(&status));
    let (stdout, _) = text(&status);
    assert!(
        stdout.contains("6 target(s): 1 at 4, 5 one behind, 0 dirty, 0 locked"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tenant_2") && stdout.contains("1 pending"),
        "{stdout}"
    );
}

async fn every_database_matching_the_pattern_is_a_target(server: Server) {
    let Some(t) = Tenants::databases(server, 3).await else {
        return;
    };
    let m = t.counted(1..=2, 0.0);
    let run = t
        .fleet(&m, &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    let report = json(&run);
    assert_eq!(outcomes(&report), all(&t.names(), "applied"), "{report}");
    assert_eq!(report["totals"]["migrations_applied"], 6, "{report}");
    assert_eq!(t.effects().await, every(&t.names(), 1..=2, 1));
    // Each database has its own history; the default database, which the pattern does not
    // match, has none.
    for tenant in &t.databases {
        let tables = tenant.tables().await;
        assert!(
            tables.contains(&"dirthara_migrations".to_string()),
            "{}: {tables:?}",
            tenant.name
        );
    }
    let tables = t.db.tables().await;
    assert!(
        !tables.iter().any(|t| t.starts_with("dirthara")),
        "{tables:?}"
    );
}

async fn a_targets_file_standard_input_and_a_targets_query_name_their_targets_and_no_password_is_printed(
    server: Server,
) {
    let Some(t) = Tenants::databases(server, 2).await else {
        return;
    };
    // Every URL has a password. PostgreSQL's trust authentication ignores it; MariaDB's
    // tenants are reached as a user who needs it. Either way it must never be shown.
    let password = "Sw0rdf1sh";
    let user = match server {
        Server::Mysql => Some(t.db.user("fleet", password).await),
        _ => None,
    };
    let urls: Vec<String> = match &user {
        Some(user) => {
            for tenant in &t.databases {
                (t.db)
                    .execute(&format!(
                        "GRANT ALL PRIVILEGES ON {}.* TO '{}'@'%'",
                        tenant.name, user.name
                    ))
                    .await;
            }
            (1..=2).map(|i| user.url(t.url(i))).collect()
        }
        None => (1..=2)
            .map(|i| {
                t.url(i)
                    .replacen("postgres@", &format!("postgres:{password}@"), 1)
            })
            .collect(),
    };
    let login = match &user {
        Some(user) => format!("mysql://{}:***@", user.name),
        None => "postgres://postgres:***@".to_string(),
    };
    let file = tempfile::NamedTempFile::new().unwrap();
    let list = format!(
        "# the tenants\nacme {}\n\n{}  # no name: the URL names it\n",
        urls[0], urls[1]
    );
    std::fs::write(file.path(), &list).unwrap();
    let m = Migrations::tables(1);
    let path = file.path().to_str().unwrap();
    let mut printed = String::new();
    for output in ["json", "ndjson", "human"] {
        let run = dirthara(
            &t.db.url,
            m.path(),
            &["--targets", path, "migrate", "--output", output],
        )
        .output()
        .unwrap();
        assert!(run.status.success(), "{:?}", text(&run));
        let (stdout, stderr) = text(&run);
        if output == "ndjson" {
            ndjson(&stdout);
        }
        printed.push_str(&stdout);
        printed.push_str(&stderr);
    }
    assert!(!printed.contains(password), "{printed}");
    assert!(printed.contains("\"acme\""), "{printed}");
    assert!(
        printed.contains(&login),
        "the unnamed target is its URL, masked: {printed}"
    );

    // ndjson: every event of a target names it.
    let run = dirthara(
        &t.db.url,
        m.path(),
        &["--targets", path, "status", "--output", "ndjson"],
    )
    .output()
    .unwrap();
    let events = ndjson(&text(&run).0);
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "target_finished")
        .collect();
    assert_eq!(finished.len(), 2, "{events:?}");
    assert!(finished.iter().any(|e| e["target"] == "acme"), "{events:?}");
    assert_eq!(events.last().unwrap()["event"], "result");

    // The same list on standard input (`--targets -`).
    let read = with_stdin(
        dirthara(
            &t.db.url,
            m.path(),
            &["--targets", "-", "status", "--output", "json"],
        ),
        &list,
    );
    assert!(read.status.success(), "{:?}", text(&read));
    let found = outcomes(&json(&read));
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found["acme"], "up_to_date", "{found:?}");
    assert!(
        found.keys().any(|name| name.starts_with(&login)),
        "{found:?}"
    );
    assert!(!format!("{:?}", text(&read)).contains(password));

    // The same targets from a query on the default connection.
    let text_type = match server {
        Server::Postgres => "text",
        _ => "VARCHAR(255)",
    };
    (t.db)
        .execute(&format!(
            "CREATE TABLE tenants (name {text_type}, url {text_type}, active BOOL)"
        ))
        .await;
    (t.db)
        .execute(&format!(
            "INSERT INTO tenants VALUES ('acme', '{}', true), ('globex', '{}', true), \
             ('gone', 'postgres://nowhere/x', false)",
            urls[0], urls[1]
        ))
        .await;
    m.add(2, "t2", "CREATE TABLE t2 (id INT)", None);
    let run = dirthara(
        &t.db.url,
        m.path(),
        &[
            "--targets-sql",
            "SELECT name, url FROM tenants WHERE active ORDER BY name",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    let report = json(&run);
    assert_eq!(
        outcomes(&report),
        all(&["acme".into(), "globex".into()], "applied")
    );
    assert!(!format!("{:?}", text(&run)).contains(password));
}

#[tokio::test]
async fn fleet_in_dirthara_toml_reads_its_targets_file_beside_it_or_standard_input() {
    let Some(t) = Tenants::databases(Server::Postgres, 3).await else {
        return;
    };
    t.break_tenant(1).await;
    let m = Migrations::tables(1);
    let project = scratch_dir();
    let list: String = (["acme", "globex", "initech"].iter().enumerate())
        .map(|(i, name)| format!("{name} {}\n", t.url(i + 1)))
        .collect();
    std::fs::write(project.path().join("tenants.txt"), &list).unwrap();
    let config = project.path().join("dirthara.toml");
    let run = |toml: &str, stdin: &str| {
        std::fs::write(&config, toml).unwrap();
        let mut cmd = dirthara(
            &t.db.url,
            m.path(),
            &[
                "--config",
                config.to_str().unwrap(),
                "migrate",
                "--output",
                "json",
            ],
        );
        // Run from elsewhere: the targets file is found beside the configuration file.
        cmd.current_dir(m.path());
        let out = with_stdin(cmd, stdin);
        assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
        outcomes(&json(&out))
    };
    let expect = |outcomes: [&str; 3]| -> BTreeMap<String, String> {
        (["acme", "globex", "initech"].into_iter().zip(outcomes))
            .map(|(name, outcome)| (name.to_string(), outcome.to_string()))
            .collect()
    };
    // The canary (the first target) fails: nothing else starts, `keep_going` or not.
    let found = run(
        "[fleet]\ntargets = \"tenants.txt\"\ncanary = 1\nkeep_going = true\n",
        "",
    );
    assert_eq!(found, expect(["failed", "skipped", "skipped"]));
    // `-`: the list on standard input, as `--targets -` reads it; one at a time, going on
    // past the failure.
    let found = run(
        "[fleet]\ntargets = \"-\"\njobs = 1\nkeep_going = true\n",
        &list,
    );
    assert_eq!(found, expect(["failed", "applied", "applied"]));
}

// ---------------------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------------------

async fn a_failed_canary_starts_nothing_else(server: Server) {
    let Some(t) = Tenants::new(server, 5).await else {
        return;
    };
    t.break_tenant(2).await;
    let m = t.counted(1..=1, 0.0);
    let run = t
        .fleet(
            &m,
            &[
                "--canary",
                "2",
                "--keep-going",
                "migrate",
                "--output",
                "json",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{:?}", text(&run));
    let found = outcomes(&json(&run));
    assert_eq!(found[&t.name(1)], "applied");
    assert_eq!(found[&t.name(2)], "failed");
    for i in 3..=5 {
        assert_eq!(found[&t.name(i)], "skipped", "{found:?}");
    }
    let (_, stderr) = text(&run);
    let said = format!(
        "Error [MIGRATION_FAILED]: 1 of 5 target(s) failed and 3 were not started; the first, `{}`",
        t.name(2)
    );
    assert!(stderr.contains(&said), "{stderr}");
}

async fn max_failures_stops_the_starting_and_keep_going_never_does(server: Server) {
    let Some(t) = Tenants::new(server, 5).await else {
        return;
    };
    t.break_tenant(2).await;
    let m = t.counted(1..=1, 0.0);
    let in_order = |run: &Output| {
        let found = outcomes(&json(run));
        t.names()
            .iter()
            .map(|n| found[n].clone())
            .collect::<Vec<_>>()
    };
    // One at a time, so the order is the list's: 1 applied, 2 fails, the rest never start.
    let run = t
        .fleet(&m, &["--jobs", "1", "migrate", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        in_order(&run),
        ["applied", "failed", "skipped", "skipped", "skipped"]
    );
    t.break_tenant(4).await;
    let run = t
        .fleet(
            &m,
            &[
                "--jobs",
                "1",
                "--max-failures",
                "2",
                "migrate",
                "--output",
                "json",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(
        in_order(&run),
        ["up_to_date", "failed", "applied", "failed", "skipped"]
    );
    let run = t
        .fleet(&m, &["--keep-going", "migrate", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        in_order(&run),
        ["up_to_date", "failed", "up_to_date", "failed", "applied"]
    );
}

async fn an_unreachable_target_fails_with_connection_error_while_the_others_proceed(
    server: Server,
) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let file = tempfile::NamedTempFile::new().unwrap();
    let closed = match server {
        Server::Postgres => "postgres://postgres:Sw0rdf1sh@127.0.0.1:1/nothing",
        _ => "mysql://root:Sw0rdf1sh@127.0.0.1:1/nothing",
    };
    std::fs::write(file.path(), format!("here {}\ngone {closed}\n", db.url)).unwrap();
    let m = Migrations::tables(1);
    let run = dirthara(
        &db.url,
        m.path(),
        &[
            "--targets",
            file.path().to_str().unwrap(),
            "--keep-going",
            "--connect-timeout",
            "1s",
            "migrate",
            "--output",
            "ndjson",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(1), "{:?}", text(&run));
    // No event has a key twice: the one that waited for `gone` names the target it is
    // about and, apart, the URL it tried (masked).
    let events = ndjson(&text(&run).0);
    let waiting = (events.iter())
        .find(|e| e["event"] == "connection_waiting")
        .unwrap_or_else(|| panic!("no connection_waiting: {events:?}"));
    assert_eq!(waiting["target"], "gone", "{waiting}");
    let url = waiting["url"].as_str().unwrap_or_default();
    assert!(url.ends_with(":***@127.0.0.1:1/nothing"), "{waiting}");
    let report = result_of(&events);
    assert_eq!(outcomes(report)["here"], "applied");
    let gone = target(report, "gone");
    assert_eq!(gone["outcome"], "failed");
    assert_eq!(gone["error"]["code"], "CONNECTION_ERROR", "{gone}");
    let everything = format!("{:?}", text(&run));
    assert!(!everything.contains("Sw0rdf1sh"), "{everything}");
}

// ---------------------------------------------------------------------------------------
// Many runners
// ---------------------------------------------------------------------------------------

/// The `target_*` events of `target`, in order: `started`, `deferred`, `started again`,
/// `finished <outcome>`.
fn turns(events: &[Value], target: &str) -> Vec<String> {
    (events.iter())
        .filter(|e| e["target"] == target)
        .filter_map(|e| match e["event"].as_str()? {
            "target_started" if e["deferred"] == true => Some("started again".to_string()),
            "target_started" => Some("started".to_string()),
            "target_deferred" => Some("deferred".to_string()),
            "target_finished" => Some(format!("finished {}", e["outcome"].as_str()?)),
            _ => None,
        })
        .collect()
}

async fn two_fleet_runners_share_the_work_and_one_comes_back_to_the_target_it_found_locked(
    server: Server,
) {
    let Some(t) = Tenants::new(server, 6).await else {
        return;
    };
    // The first tenant's migration 1 waits at a gate: whichever runner takes that tenant
    // holds its lock until the test opens the gate.
    let mut gates = Gates::closed(&t.db, &[1]).await;
    let first = t.name(1);
    let m = Migrations::new();
    let at_the_gate = gates.wait_at(1, &format!("{} = '{first}'", t.here()));
    m.add(
        1,
        "t1",
        &format!(
            "-- dirthara:table-lock-timeout off\nCREATE TABLE t1 (id INT);\n{};\n{at_the_gate};",
            t.effect(1)
        ),
        None,
    );
    m.add(
        2,
        "t2",
        &format!(
            "CREATE TABLE t2 (id INT);\n{};\n{};",
            t.effect(2),
            server.sleep(0.1)
        ),
        None,
    );
    let start = || Watched::spawn(t.fleet(&m, &["--jobs", "2", "--output", "ndjson", "migrate"]));
    let mut runners = [start(), start()];
    // While the first tenant's lock is held, every other tenant is migrated (their locks are
    // their own: none waits on it), and the runner that found it held has left it for later.
    let others = every(&t.names()[1..], 1..=2, 1);
    until(
        "the other tenants migrated, the first one left for later",
        async || {
            let deferred = runners.iter_mut().any(|r| {
                r.poll();
                turns(&r.events, &first).contains(&"deferred".to_string())
            });
            let done = t.effects().await;
            deferred && others.keys().all(|k| done.contains_key(k))
        },
    )
    .await;
    assert!(!t.effects().await.contains_key(&(first.clone(), 2)));
    gates.open(1).await;
    let ended: Vec<Ended> = (runners.into_iter())
        .map(|r| r.finish(Duration::from_secs(120)))
        .collect();
    for run in &ended {
        assert_eq!(run.code, Some(0), "{run:?}");
    }
    // One runner migrated the first tenant; the other found its lock held, moved on, came
    // back to it when it had done everything else, and found nothing left to do.
    let (came_back, migrated) = match turns(&ended[0].events, &first).contains(&"deferred".into()) {
        true => (&ended[0], &ended[1]),
        false => (&ended[1], &ended[0]),
    };
    assert_eq!(
        turns(&came_back.events, &first),
        [
            "started",
            "deferred",
            "started again",
            "finished up_to_date"
        ],
        "{came_back:?}"
    );
    assert_eq!(
        turns(&migrated.events, &first),
        ["started", "finished applied"],
        "{migrated:?}"
    );
    // It came back once its first pass was over: every target it did not leave for later
    // had finished.
    let again = (came_back.events.iter())
        .position(|e| {
            e["target"] == first && e["event"] == "target_started" && e["deferred"] == true
        })
        .unwrap();
    for other in &t.names()[1..] {
        if turns(&came_back.events, other).contains(&"deferred".to_string()) {
            continue;
        }
        let finished = (came_back.events.iter())
            .position(|e| e["target"] == *other && e["event"] == "target_finished")
            .unwrap_or_else(|| panic!("{other} never finished: {came_back:?}"));
        assert!(
            finished < again,
            "{other} finished after the return: {came_back:?}"
        );
    }
    let report = result_of(&came_back.events);
    assert_eq!(target(report, &first)["deferred"], true, "{report}");
    // Between them every target got both migrations, and no migration ran twice anywhere.
    let reports = [result_of(&ended[0].events), result_of(&ended[1].events)];
    let applied = applied_by_target(&reports);
    assert_eq!(
        applied,
        t.names()
            .into_iter()
            .map(|n| (n, 2))
            .collect::<BTreeMap<_, _>>()
    );
    assert_eq!(t.effects().await, every(&t.names(), 1..=2, 1));
}

async fn a_fleet_runner_killed_outright_leaves_what_the_design_says_and_a_rerun_finishes_the_rest(
    server: Server,
) {
    let Some(t) = Tenants::new(server, 5).await else {
        return;
    };
    // Migration 2 makes its table, counts itself, then waits at a gate.
    let mut gates = Gates::closed(&t.db, &[1]).await;
    let m = Migrations::new();
    m.add(
        1,
        "t1",
        &format!("CREATE TABLE t1 (id INT);\n{};", t.effect(1)),
        None,
    );
    m.add(
        2,
        "t2",
        &format!(
            "-- dirthara:table-lock-timeout off\nCREATE TABLE t2 (id INT);\n{};\n{};",
            t.effect(2),
            gates.wait_at(1, "1 = 1")
        ),
        None,
    );
    let mut runner = Watched::spawn(t.fleet(&m, &["--jobs", "2", "--output", "ndjson", "migrate"]));
    until("both jobs inside migration 2, at the gate", async || {
        gates.waiting(&t.db).await == 2
    })
    .await;
    runner.kill();
    let killed = runner.finish(Duration::from_secs(30));
    let orphans_run_on = t.db.orphaned_statements_run_on().await;
    if !orphans_run_on {
        // PostgreSQL notices the vanished client while its statement waits (dirthara's 1 s
        // connection check), ends the session and rolls the step back.
        until(
            "the server ended the killed runner's sessions",
            async || gates.waiting(&t.db).await == 0,
        )
        .await;
    }
    // MariaDB notices only when the statement ends: what the killed runner left running
    // goes on once the gate opens, and ends.
    gates.open(1).await;
    let in_flight: BTreeSet<String> = (killed.events.iter())
        .filter(|e| e["event"] == "migration_started" && e["version"] == 2)
        .map(|e| e["target"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        in_flight,
        BTreeSet::from([t.name(1), t.name(2)]),
        "{killed:?}"
    );

    let rerun = t
        .fleet(&m, &["--keep-going", "migrate", "--output", "json"])
        .output()
        .unwrap();
    let report = json(&rerun);
    let dirty: BTreeSet<String> = (report["targets"].as_array().unwrap().iter())
        .filter(|t| t["error"]["code"] == "DIRTY_MIGRATION")
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    if server.transactional_ddl() && orphans_run_on {
        // PostgreSQL before 14 never noticed the dead runner: each in-flight step's
        // statements, history record and COMMIT were already sent, and the server finished
        // them once the gate opened. Those tenants are up to date; the rest are applied.
        assert!(rerun.status.success(), "{:?}", text(&rerun));
        let expected: BTreeMap<String, String> = (t.names().iter())
            .map(|name| {
                let outcome = if in_flight.contains(name) {
                    "up_to_date"
                } else {
                    "applied"
                };
                (name.clone(), outcome.to_string())
            })
            .collect();
        assert_eq!(outcomes(&report), expected, "{report}");
    } else if server.transactional_ddl() {
        // PostgreSQL ended the dead runner's sessions and rolled their steps back: the
        // re-run applies migration 2 there, and everything everywhere else.
        assert!(rerun.status.success(), "{:?}", text(&rerun));
        assert_eq!(outcomes(&report), all(&t.names(), "applied"), "{report}");
    } else {
        // MariaDB's DDL is not transactional: migration 2 was mid-flight on two tenants and
        // may be half-applied (its table is there, its count committed). The re-run says so,
        // DIRTY_MIGRATION, for exactly those, with their running record kept, and finishes
        // every other tenant.
        assert_eq!(rerun.status.code(), Some(1), "{:?}", text(&rerun));
        assert_eq!(dirty, in_flight, "{report}");
        let found = outcomes(&report);
        for (i, name) in t.names().iter().enumerate() {
            if in_flight.contains(name) {
                let error = &target(&report, name)["error"]["message"];
                assert!(
                    error.as_str().unwrap().contains("migration 2 (t2)"),
                    "{error}"
                );
                assert_eq!(
                    t.history(i + 1).await,
                    [(1, "applied".to_string()), (2, "running".to_string())]
                );
            } else {
                assert_eq!(found[name], "applied", "{report}");
            }
        }
        // Its changes are in place: resolved as applied, as the error says, on those
        // tenants (their list on standard input); then nothing is left to do anywhere.
        let list: String = (1..=t.n)
            .filter(|&i| in_flight.contains(&t.name(i)))
            .map(|i| format!("{} {}\n", t.name(i), t.url(i)))
            .collect();
        let resolve = with_stdin(
            dirthara(
                &t.db.url,
                m.path(),
                &["--targets", "-", "resolve", "2", "--applied"],
            ),
            &list,
        );
        assert!(resolve.status.success(), "{:?}", text(&resolve));
        let last = t
            .fleet(&m, &["migrate", "--output", "json"])
            .output()
            .unwrap();
        assert!(last.status.success(), "{:?}", text(&last));
        assert_eq!(outcomes(&json(&last)), all(&t.names(), "up_to_date"));
    }
    assert_eq!(
        t.effects().await,
        every(&t.names(), 1..=2, 1),
        "every migration took effect on every tenant, none twice"
    );
    for i in 1..=t.n {
        assert_eq!(
            t.history(i).await,
            [(1, "applied".to_string()), (2, "applied".to_string())]
        );
    }
}

async fn shards_split_a_fleet_between_runners_without_overlap(server: Server) {
    let Some(t) = Tenants::new(server, 9).await else {
        return;
    };
    let m = t.counted(1..=1, 0.0);
    let mut seen = BTreeMap::new();
    for shard in ["1/3", "2/3", "3/3"] {
        let run = t
            .fleet(&m, &["--shard", shard, "migrate", "--output", "json"])
            .output()
            .unwrap();
        assert!(run.status.success(), "{:?}", text(&run));
        for (name, outcome) in outcomes(&json(&run)) {
            assert_eq!(outcome, "applied", "{name} in shard {shard}");
            assert!(seen.insert(name, shard).is_none(), "a target in two shards");
        }
    }
    assert_eq!(seen.len(), 9);
    assert_eq!(t.effects().await, every(&t.names(), 1..=1, 1));
    // The same shard again is the same targets, now up to date.
    let shard = seen[&t.name(1)];
    let again = t
        .fleet(&m, &["--shard", shard, "migrate", "--output", "json"])
        .output()
        .unwrap();
    let found = outcomes(&json(&again));
    assert!(found.contains_key(&t.name(1)), "{found:?}");
    assert!(
        found.keys().all(|name| seen[name] == shard) && found.values().all(|o| o == "up_to_date"),
        "{found:?}"
    );
    let bad = t
        .fleet(&m, &["--shard", "0/3", "migrate"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{:?}", text(&bad));
}

#[tokio::test]
async fn rollback_baseline_preview_and_resolve_run_over_a_fleet_and_fresh_does_not() {
    let Some(t) = Tenants::new(Server::Postgres, 3).await else {
        return;
    };
    let m = t.counted(1..=2, 0.0);
    let run = |args: &[&str]| t.fleet(&m, args).output().unwrap();
    assert!(run(&["migrate"]).status.success());
    let preview = run(&["preview", "rollback", "--output", "json"]);
    assert!(preview.status.success(), "{:?}", text(&preview));
    assert!(outcomes(&json(&preview)).values().all(|o| o == "pending"));
    let rollback = run(&["down", "--output", "json"]);
    assert!(rollback.status.success(), "{:?}", text(&rollback));
    assert_eq!(json(&rollback)["totals"]["migrations_reverted"], 3);
    let baseline = run(&["baseline", "2", "--output", "json"]);
    assert!(baseline.status.success(), "{:?}", text(&baseline));
    assert!(outcomes(&json(&baseline)).values().all(|o| o == "applied"));
    // An applied file edited on purpose: its new checksum accepted everywhere.
    let edited = m.path().join("2_t2.up.sql");
    let text_now = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, format!("{text_now}\n-- reviewed")).unwrap();
    assert_eq!(run(&["migrate"]).status.code(), Some(1));
    let resolve = run(&["resolve", "2", "--accept-checksum", "--output", "json"]);
    assert!(resolve.status.success(), "{:?}", text(&resolve));
    assert!(outcomes(&json(&resolve)).values().all(|o| o == "applied"));
    assert!(run(&["migrate"]).status.success());
    for refused in [&["fresh", "--force"][..], &["refresh"], &["unlock"]] {
        let out = run(refused);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out).1.contains("does not run over a fleet"),
            "{:?}",
            text(&out)
        );
    }
}

// ---------------------------------------------------------------------------------------
// wait
// ---------------------------------------------------------------------------------------

async fn wait_returns_once_migrated_and_fails_clearly_on_timeout_dirt_or_a_newer_database_under_strict(
    server: Server,
) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "t1", "CREATE TABLE t1 (id INT)", None);
    m.add(2, "slow", &server.sleep(1.5), None);
    let wait = |args: &[&str]| {
        let mut all = vec!["wait"];
        all.extend(args);
        dirthara(&db.url, m.path(), &all)
    };
    // Nothing applied yet, and no runner: a timeout. The history is caught being created, as
    // a runner on MariaDB creates it (its meta table committed before the layout row, no
    // history table yet): not yet there, not a foreign table.
    db.execute(
        "CREATE TABLE dirthara_migrations_meta \
         (meta_key VARCHAR(64) NOT NULL PRIMARY KEY, meta_value VARCHAR(255) NOT NULL)",
    )
    .await;
    let timed_out = wait(&["--timeout", "1s"]).output().unwrap();
    assert_eq!(timed_out.status.code(), Some(1), "{:?}", text(&timed_out));
    assert!(
        text(&timed_out)
            .1
            .contains("Error [WAIT_TIMEOUT]: gave up waiting after"),
        "{:?}",
        text(&timed_out)
    );
    db.drop_table("dirthara_migrations_meta").await;

    // A runner migrates while `wait` waits: it returns once the last migration is in.
    let runner = spawn(dirthara(&db.url, m.path(), &["migrate"]));
    let waited = wait(&["--timeout", "60s", "--output", "json"])
        .output()
        .unwrap();
    assert!(waited.status.success(), "{:?}", text(&waited));
    assert_eq!(json(&waited)["until"], 2);
    let runner = wait_with_watchdog(runner, Duration::from_secs(60));
    assert!(runner.status.success());
    assert_eq!(db.history().await.len(), 2);
    assert!(wait(&["--until", "1"]).output().unwrap().status.success());
    let unknown = wait(&["--until", "7"]).output().unwrap();
    assert!(
        text(&unknown).1.contains("UNKNOWN_VERSION"),
        "{:?}",
        text(&unknown)
    );

    // A dirty migration nobody is working on.
    db.execute("UPDATE dirthara_migrations SET state = 'running' WHERE version = 2")
        .await;
    let dirty = wait(&["--timeout", "30s"]).output().unwrap();
    assert!(
        text(&dirty).1.contains("Error [DIRTY_MIGRATION]"),
        "{:?}",
        text(&dirty)
    );
    db.execute("UPDATE dirthara_migrations SET state = 'applied' WHERE version = 2")
        .await;

    // A database migrated by a newer build than these files: fine, with a note (a rolling
    // deploy); `--strict` refuses it (tests/wait.rs has the details).
    let older = Migrations::new();
    older.add(1, "t1", "CREATE TABLE t1 (id INT)", None);
    let newer = dirthara(&db.url, older.path(), &["wait", "--timeout", "30s"])
        .output()
        .unwrap();
    let (_, stderr) = text(&newer);
    assert!(newer.status.success(), "{stderr}");
    assert!(stderr.contains("warning [MISSING_MIGRATION]"), "{stderr}");
    let strict = dirthara(
        &db.url,
        older.path(),
        &["--strict", "wait", "--timeout", "30s"],
    )
    .output()
    .unwrap();
    let (_, stderr) = text(&strict);
    assert!(
        stderr.contains("Error [MISSING_MIGRATION]") && stderr.contains("newer than this build"),
        "{stderr}"
    );
}

async fn wait_over_a_fleet_waits_for_every_target(server: Server) {
    let Some(t) = Tenants::new(server, 3).await else {
        return;
    };
    let m = t.counted(1..=1, 0.0);
    let pending = t.fleet(&m, &["wait", "--timeout", "1s"]).output().unwrap();
    assert_eq!(pending.status.code(), Some(1), "{:?}", text(&pending));
    assert!(
        text(&pending).1.contains("WAIT_TIMEOUT"),
        "{:?}",
        text(&pending)
    );
    let migrated = t.fleet(&m, &["migrate"]).output().unwrap();
    assert!(migrated.status.success(), "{:?}", text(&migrated));
    let ready = t.fleet(&m, &["wait", "--timeout", "10s"]).output().unwrap();
    assert!(ready.status.success(), "{:?}", text(&ready));
}

async fn wait_needs_only_the_right_to_read_the_history(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::tables(2);
    let run = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    let reader = db.user("reader", "r3ad0nly").await;
    match server {
        Server::Postgres => {
            db.execute(&format!(
                "REVOKE ALL ON SCHEMA public FROM {0}; \
                 GRANT SELECT ON dirthara_migrations, dirthara_migrations_meta TO {0}",
                reader.name
            ))
            .await
        }
        _ => {
            for table in ["dirthara_migrations", "dirthara_migrations_meta"] {
                db.execute(&format!(
                    "GRANT SELECT ON {}.{table} TO '{}'@'%'",
                    db.name, reader.name
                ))
                .await;
            }
        }
    }
    let before = db.tables().await;
    let waited = dirthara(
        &reader.url(&db.url),
        m.path(),
        &["wait", "--timeout", "10s"],
    )
    .output()
    .unwrap();
    assert!(waited.status.success(), "{:?}", text(&waited));
    assert_eq!(db.tables().await, before, "wait created nothing");
    assert!(!format!("{:?}", text(&waited)).contains("r3ad0nly"));
}

// ---------------------------------------------------------------------------------------
// Signals and connections (PostgreSQL)
// ---------------------------------------------------------------------------------------

/// The session-level advisory locks (dirthara's form: one bigint key) held in `db`.
async fn advisory_locks_held(db: &TestDb) -> usize {
    db.strings(
        "SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND objsubid = 1 AND database = \
         (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .await[0]
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_signal_finishes_the_running_targets_releases_their_locks_and_skips_the_rest() {
    let Some(t) = Tenants::new(Server::Postgres, 6).await else {
        return;
    };
    // tenant_1 and tenant_2 (the two jobs) wait inside migration 1, each at a gate of its own.
    let mut gates = Gates::closed(&t.db, &[1, 2]).await;
    let m = Migrations::new();
    m.add(
        1,
        "t1",
        &format!(
            "-- dirthara:table-lock-timeout off\nCREATE TABLE t1 (id INT);\n{};\n{};\n{};",
            t.effect(1),
            gates.wait_at(1, "current_schema() = 'tenant_1'"),
            gates.wait_at(2, "current_schema() = 'tenant_2'"),
        ),
        None,
    );
    m.add(
        2,
        "t2",
        &format!("CREATE TABLE t2 (id INT);\n{};", t.effect(2)),
        None,
    );
    let mut runner = Watched::spawn(t.fleet(&m, &["--jobs", "2", "--output", "ndjson", "migrate"]));
    until("both jobs inside migration 1, at their gates", async || {
        gates.waiting(&t.db).await == 2
    })
    .await;
    assert_eq!(advisory_locks_held(&t.db).await, 2);
    let pid = runner.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    until("the runner heard the signal", async || {
        runner.stderr().contains("stopping:")
    })
    .await;
    // tenant_1 finishes its migration and stops; its lock is let go at once, while the
    // runner is still alive and at work on tenant_2 (which still waits at its gate).
    gates.open(1).await;
    until("tenant_1 finished", async || {
        runner.poll();
        (turns(&runner.events, "tenant_1").iter()).any(|turn| turn.starts_with("finished"))
    })
    .await;
    assert_eq!(
        advisory_locks_held(&t.db).await,
        1,
        "only tenant_2's lock is held: {:?}",
        runner.events
    );
    gates.open(2).await;
    let out = runner.finish(Duration::from_secs(60));
    assert_eq!(out.code, Some(130), "{out:?}");
    let report = result_of(&out.events);
    let found = outcomes(report);
    for i in 3..=6 {
        assert_eq!(found[&t.name(i)], "skipped", "{found:?}");
    }
    // Every target that took its lock let it go, and said so.
    for name in t.names() {
        let count = |kind: &str| {
            (out.events.iter())
                .filter(|e| e["target"] == name.as_str() && e["event"] == kind)
                .count()
        };
        let expected = usize::from(name == "tenant_1" || name == "tenant_2");
        assert_eq!(count("lock_acquired"), expected, "{name}: {:?}", out.events);
        assert_eq!(count("lock_released"), expected, "{name}: {:?}", out.events);
    }
    // Every migration that took effect is recorded: the running ones finished, none began
    // after the signal.
    let recorded: i64 = applied_by_target(&[report]).values().sum::<usize>() as i64;
    assert_eq!(t.effects().await, every(&[t.name(1), t.name(2)], 1..=1, 1));
    assert_eq!(recorded, 2, "{report}");
}

#[tokio::test]
async fn a_connection_kept_for_the_next_target_carries_nothing_over() {
    let Some(t) = Tenants::new(Server::Postgres, 6).await else {
        return;
    };
    let db = &t.db;
    db.execute("CREATE TABLE public.leaks (target text, setting text, temp_tables bigint)")
        .await;
    let m = Migrations::new();
    // What the previous target's session left is written down first, then this one leaves
    // a setting and a temporary table behind.
    m.add(
        1,
        "leave_things_behind",
        "INSERT INTO public.leaks VALUES (current_schema(), \
         current_setting('dirthara_test.leak', true), \
         (SELECT count(*) FROM pg_class WHERE relname = 'leftover' AND relpersistence = 't'));\n\
         SELECT set_config('dirthara_test.leak', 'from ' || current_schema(), false);\n\
         CREATE TEMP TABLE leftover (x INT);",
        None,
    );
    let sessions = || async {
        db.strings("SELECT sessions::text FROM pg_stat_database WHERE datname = current_database()")
            .await[0]
            .parse::<i64>()
            .unwrap()
    };
    let before = sessions().await;
    let run = t.fleet(&m, &["--jobs", "1", "migrate"]).output().unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    // The targets one after the other on one session (and its second, which names a
    // blocker), not two each; one more lists them, and one reads the count.
    let opened = sessions().await - before;
    assert!(opened <= 4, "{opened} sessions for 6 targets");
    let leaks = db
        .strings("SELECT target || ': ' || coalesce(setting, '') || ', ' || temp_tables FROM public.leaks ORDER BY 1")
        .await;
    assert_eq!(
        leaks,
        (1..=6)
            .map(|i| format!("tenant_{i}: , 0"))
            .collect::<Vec<_>>()
    );
}

/// Tenants differ in size: `preview` over a fleet judges each target on its own catalog and
/// says which would refuse the run (`BLOCKING_DDL`), and `migrate` refuses only there.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_preview_over_a_fleet_says_which_tenants_would_refuse() {
    let Some(tenants) = Tenants::new(Server::Postgres, 2).await else {
        return;
    };
    tenants
        .db
        .execute(
            "CREATE TABLE tenant_1.big (id int PRIMARY KEY, n int, note text);\
             INSERT INTO tenant_1.big SELECT i, i, 'row ' || i FROM generate_series(1, 20000) i;\
             CREATE TABLE tenant_2.big (id int PRIMARY KEY, n int, note text);\
             INSERT INTO tenant_2.big SELECT i, i, 'row ' || i FROM generate_series(1, 10) i;\
             ANALYZE tenant_1.big; ANALYZE tenant_2.big;",
        )
        .await;
    let m = Migrations::new();
    m.add(
        1,
        "widen",
        "ALTER TABLE big ALTER COLUMN n TYPE bigint;",
        None,
    );
    let limit = ["--blocking-table-size", "256kB"];
    let out = tenants
        .fleet(
            &m,
            &[&["preview", "migrate", "--output", "json"][..], &limit].concat(),
        )
        .output()
        .unwrap();
    let report = json(&out);
    let verdict = |name: &str| -> Vec<bool> {
        let target = (report["targets"].as_array().unwrap().iter())
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {report}"));
        (target["preview"]["steps"][0]["findings"]
            .as_array()
            .unwrap()
            .iter())
        .map(|f| f["refuses"].as_bool().unwrap())
        .collect()
    };
    assert_eq!(verdict("tenant_1"), [true], "{report}");
    assert_eq!(verdict("tenant_2"), [false], "{report}");
    // For people: the one line per target says it.
    let out = tenants
        .fleet(&m, &[&["preview", "migrate"][..], &limit].concat())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    let line = |name: &str| -> String {
        (stdout.lines().chain(stderr.lines()))
            .find(|l| l.contains(name) && l.contains("step(s) to run"))
            .unwrap_or_else(|| panic!("no line for {name}: {stdout}\n{stderr}"))
            .to_string()
    };
    assert!(
        line("tenant_1").contains("would refuse (BLOCKING_DDL): changing-column-type on `big`"),
        "{stdout}\n{stderr}"
    );
    assert!(
        !line("tenant_2").contains("would refuse"),
        "{stdout}\n{stderr}"
    );
    // And the run refuses only there.
    let out = tenants
        .fleet(&m, &[&["migrate", "--keep-going"][..], &limit].concat())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    assert!(tenants.history(1).await.is_empty());
    assert_eq!(tenants.history(2).await.len(), 1);
}

/// Without a terminal (a CI log), a fleet prints a line for a target only when it failed, then
/// the table of the targets that were not fine and the totals; `-v` prints every target.
async fn without_a_terminal_a_fleet_prints_only_the_targets_that_failed_and_the_totals(
    server: Server,
) {
    let Some(t) = Tenants::new(server, 4).await else {
        return;
    };
    let m = t.counted(1..=1, 0.0);
    let lines_naming = |stderr: &str, name: &str| {
        (stderr.lines())
            .filter(|l| l.starts_with(&format!("[{name}]")))
            .count()
    };
    // Every target applied: fine, so nothing but the totals.
    let run = t.fleet(&m, &["--keep-going", "migrate"]).output().unwrap();
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stderr, "", "{stdout}");
    assert_eq!(
        stdout.trim_end(),
        "4 target(s): 4 applied, 0 up to date, 0 failed, 0 skipped; 4 migration(s) applied"
    );
    // One target failing: its line as it ends, then its row and the totals.
    t.break_tenant_at(3, 2).await;
    let m = t.counted(1..=2, 0.0);
    let run = t.fleet(&m, &["--keep-going", "migrate"]).output().unwrap();
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    for i in [1, 2, 4] {
        assert_eq!(lines_naming(&stderr, &t.name(i)), 0, "{stderr}");
        assert!(!stdout.contains(&t.name(i)), "{stdout}");
    }
    assert_eq!(lines_naming(&stderr, &t.name(3)), 1, "{stderr}");
    assert!(stdout.contains(&t.name(3)), "{stdout}");
    assert!(stdout.contains("4 target(s): 3 applied"), "{stdout}");
    // -v: every target's line.
    let run = t
        .fleet(&m, &["-v", "--keep-going", "migrate"])
        .output()
        .unwrap();
    let (_, stderr) = text(&run);
    for name in t.names() {
        assert!(lines_naming(&stderr, &name) >= 1, "{name}: {stderr}");
    }
}

/// After a crash left some tenants dirty: a re-run reports them as dirty before the run and
/// goes on with the rest (they do not count toward the default `--max-failures 1`); one
/// `resolve` over the fleet clears them and calls the clean ones "nothing to resolve"; one
/// more `migrate` finishes the fleet.
async fn a_fleet_with_dirty_targets_recovers_in_one_resolve_and_one_migrate(server: Server) {
    let Some(t) = Tenants::new(server, 4).await else {
        return;
    };
    let run = t
        .fleet(&t.counted(1..=1, 0.0), &["migrate"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{:?}", text(&run));
    for i in [2, 3] {
        let (place, table) = match t.kind {
            Kind::Schemas => (&t.db, format!("tenant_{i}.dirthara_migrations")),
            Kind::Databases => (&t.databases[i - 1], "dirthara_migrations".to_string()),
        };
        (place)
            .execute(&format!(
                "UPDATE {table} SET state = 'running', \
                 failure = '{{\"message\": \"boom on tenant {i}\"}}' WHERE version = 1"
            ))
            .await;
    }
    let m = t.counted(1..=2, 0.0);
    // status lists each dirty target with the cause its failing run recorded.
    let run = t.fleet(&m, &["status"]).output().unwrap();
    let (stdout, _) = text(&run);
    for i in [2, 3] {
        let row = (stdout.lines())
            .find(|l| l.starts_with(&t.name(i)))
            .unwrap_or_else(|| panic!("{} not listed: {stdout}", t.name(i)));
        assert!(
            row.contains(&format!("dirty: migration 1 (t1): boom on tenant {i}")),
            "{row}"
        );
    }
    // status --dirty: those two alone, by name and cause; the totals are the fleet's.
    let run = t.fleet(&m, &["status", "--dirty"]).output().unwrap();
    let (stdout, _) = text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}");
    for i in 1..=4 {
        let listed = stdout.lines().any(|l| l.starts_with(&t.name(i)));
        assert_eq!(listed, i == 2 || i == 3, "{}: {stdout}", t.name(i));
    }
    assert!(
        stdout.contains("dirty: migration 1 (t1): boom on tenant 3"),
        "{stdout}"
    );
    assert!(stdout.contains("4 target(s)"), "{stdout}");
    let run = t
        .fleet(&m, &["status", "--dirty", "--output", "json"])
        .output()
        .unwrap();
    let report = json(&run);
    let listed: Vec<&str> = (report["targets"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [t.name(2), t.name(3)]);
    // On one database: its dirty migration and the cause; a clean one says so.
    let (place, clean) = match t.kind {
        Kind::Schemas => (None, None),
        Kind::Databases => (Some(&t.databases[1]), Some(&t.databases[0])),
    };
    if let (Some(dirty_db), Some(clean_db)) = (place, clean) {
        let run = dirthara(&dirty_db.url, m.path(), &["status", "--dirty"])
            .output()
            .unwrap();
        let (stdout, _) = text(&run);
        assert!(
            stdout.contains("1 left dirty by: boom on tenant 2"),
            "{stdout}"
        );
        assert!(!stdout.contains("t2"), "only the dirty migration: {stdout}");
        let run = dirthara(&clean_db.url, m.path(), &["status", "--dirty"])
            .output()
            .unwrap();
        assert!(
            text(&run).0.contains("No migration is dirty."),
            "{:?}",
            text(&run)
        );
    }
    let in_order = |run: &Output| {
        let found = outcomes(&json(run));
        (t.names().iter())
            .map(|n| found[n].clone())
            .collect::<Vec<_>>()
    };
    // One at a time, in the list's order, with the default --max-failures 1.
    let run = t
        .fleet(&m, &["--jobs", "1", "migrate", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "a dirty fleet is never green");
    assert_eq!(in_order(&run), ["applied", "failed", "failed", "applied"]);
    let report = json(&run);
    for i in [2, 3] {
        let dirty = target(&report, &t.name(i));
        assert_eq!(dirty["dirty_before_run"], true, "{dirty}");
        assert_eq!(dirty["error"]["code"], "DIRTY_MIGRATION", "{dirty}");
    }
    assert!(target(&report, &t.name(1))
        .get("dirty_before_run")
        .is_none());
    // With --strict, a dirty target counts toward --max-failures: the first one stops the run.
    let run = t
        .fleet(
            &m,
            &["--strict", "--jobs", "1", "migrate", "--output", "json"],
        )
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{:?}", text(&run));
    assert_eq!(
        in_order(&run),
        ["up_to_date", "failed", "skipped", "skipped"]
    );
    // The hint printed for a dirty target is a command for that target alone: pasted as
    // printed, it resolves tenant 2 and leaves tenant 3 dirty.
    let run = t.fleet(&m, &["--jobs", "1", "migrate"]).output().unwrap();
    let (stdout, stderr) = text(&run);
    let hint = (stderr.split('`'))
        .find(|part| part.starts_with("dirthara ") && part.ends_with("resolve 1 --applied"))
        .unwrap_or_else(|| panic!("no resolve hint in: {stderr}"));
    let flag = match t.kind {
        Kind::Schemas => "--schemas",
        Kind::Databases => "--databases",
    };
    assert_eq!(
        hint,
        format!("dirthara {flag} {} resolve 1 --applied", t.name(2))
    );
    assert!(
        stdout.contains(&format!("`dirthara {flag} {} resolve", t.name(3))),
        "{stdout}"
    );
    let words: Vec<&str> = hint.split(' ').skip(1).collect();
    let pasted = dirthara(&t.db.url, m.path(), &words).output().unwrap();
    assert_eq!(pasted.status.code(), Some(0), "{:?}", text(&pasted));
    assert_eq!(t.history(2).await[0].1, "applied");
    assert_eq!(t.history(3).await[0].1, "running");
    // One resolve over the fleet: the dirty ones resolved, the others nothing to resolve.
    let run = t
        .fleet(&m, &["resolve", "1", "--applied", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{:?}", text(&run));
    assert_eq!(
        in_order(&run),
        ["up_to_date", "up_to_date", "applied", "up_to_date"]
    );
    let report = json(&run);
    let clean = target(&report, &t.name(1));
    assert!(
        (clean["note"].as_str().unwrap()).starts_with("nothing to resolve: migration 1"),
        "{clean}"
    );
    // And one migrate finishes the fleet.
    let run = t
        .fleet(&m, &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{:?}", text(&run));
    assert_eq!(
        in_order(&run),
        ["up_to_date", "applied", "applied", "up_to_date"]
    );
}

/// The canary's lock is held by another runner (here one taking the first tenant alone `to 1`,
/// stopped at a gate inside migration 1): the canary pass leaves it, comes back
/// when the lock is free, and runs it then, once; the report and its totals list every
/// migration this runner applied to it.
async fn a_canary_found_locked_is_run_once_when_its_lock_is_free_and_reported_whole(
    server: Server,
) {
    let Some(t) = Tenants::new(server, 3).await else {
        return;
    };
    let mut gates = Gates::closed(&t.db, &[1]).await;
    let first = t.name(1);
    let at_the_gate = gates.wait_at(1, &format!("{} = '{first}'", t.here()));
    let m = Migrations::new();
    m.add(
        1,
        "t1",
        &format!(
            "-- dirthara:table-lock-timeout off\nCREATE TABLE t1 (id INT);\n{};\n{at_the_gate};",
            t.effect(1)
        ),
        None,
    );
    for v in 2..=3 {
        m.add(
            v,
            &format!("t{v}"),
            &format!("CREATE TABLE t{v} (id INT);\n{};", t.effect(v)),
            None,
        );
    }
    // The other runner takes the first tenant alone to migration 1, and holds its lock at
    // the gate there.
    let alone = match t.kind {
        Kind::Schemas => dirthara(
            &t.db.url,
            m.path(),
            &["--schemas", &first, "--output", "ndjson", "to", "1"],
        ),
        Kind::Databases => dirthara(t.url(1), m.path(), &["--output", "ndjson", "to", "1"]),
    };
    let other = Watched::spawn(alone);
    until(
        "the other runner at the gate in the first tenant",
        async || gates.waiting(&t.db).await == 1,
    )
    .await;
    let mut canary = Watched::spawn(t.fleet(
        &m,
        &[
            "--canary",
            "1",
            "--lock-wait",
            "60s",
            "--output",
            "ndjson",
            "migrate",
        ],
    ));
    until("the canary left for later", async || {
        canary.poll();
        turns(&canary.events, &first).contains(&"deferred".to_string())
    })
    .await;
    // Nothing else started while the canary is not done.
    assert_eq!(turns(&canary.events, &t.name(2)), Vec::<String>::new());
    gates.open(1).await;
    let other = other.finish(Duration::from_secs(120));
    let canary = canary.finish(Duration::from_secs(120));
    assert_eq!(other.code, Some(0), "{other:?}");
    assert_eq!(canary.code, Some(0), "{canary:?}");
    assert_eq!(
        turns(&canary.events, &first),
        ["started", "deferred", "started again", "finished applied"],
        "{canary:?}"
    );
    let report = result_of(&canary.events);
    let applied: Vec<i64> = (target(report, &first)["applied"].as_array().unwrap().iter())
        .map(|step| step["version"].as_i64().unwrap())
        .collect();
    assert_eq!(applied, [2, 3], "{report}");
    assert_eq!(target(report, &first)["deferred"], true, "{report}");
    let mine: usize = applied_by_target(&[report]).values().sum();
    assert_eq!(report["totals"]["migrations_applied"], mine, "{report}");
    // Between the two runners, every migration ran once on every tenant.
    assert_eq!(t.effects().await, every(&t.names(), 1..=3, 1));
}
