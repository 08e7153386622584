//! What the database holds at a checkpoint, read in one snapshot: the history table itself
//! (not a `dirthara status`, which would be a second moment), the effects, the markers and
//! the execution counters; and the wait, before reading, until every runner's server session
//! has ended.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, MySqlConnection, PgConnection, Row};

use super::{Kind, Place};
use crate::support::servers::{mongo_client, TestDb};

/// The database at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The history records: version → state (`applied`, `running`). Absent = pending.
    pub states: BTreeMap<u64, String>,
    /// The markers (`m<v>` tables or collections) that exist.
    pub markers: BTreeSet<u64>,
    /// `chaos_effects` rows per version.
    pub rows: BTreeMap<u64, u64>,
    /// How often each migration executed, counted by itself; `None` on SQLite, where the
    /// runners' announcements count instead (see `workload`).
    pub executions: Option<BTreeMap<u64, u64>>,
}

impl Snapshot {
    pub(crate) fn state(&self, v: u64) -> &str {
        self.states.get(&v).map_or("pending", String::as_str)
    }

    pub(crate) fn rows(&self, v: u64) -> u64 {
        self.rows.get(&v).copied().unwrap_or(0)
    }
}

fn marker_version(name: &str) -> Option<u64> {
    name.strip_prefix('m')?.parse().ok()
}

/// Waits until no server session of a runner is left on the round's database: a killed
/// runner's session may still be running (and then committing) its statement until the
/// server notices the client is gone, so a free lock is not enough. `runners`: the process
/// ids of the round's runners. Returns the sessions still there after 90 s, if any.
pub(crate) async fn wait_for_sessions_to_end(
    kind: Kind,
    place: &Place,
    runners: &[u32],
) -> Result<(), String> {
    let Place::Server(db) = place else {
        // SQLite: the runners' processes are gone, and with them their connections.
        return Ok(());
    };
    let started = Instant::now();
    loop {
        let left = sessions(kind, db, runners).await;
        if left.is_empty() {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(90) {
            return Err(format!(
                "sessions still open 90 s after the runners ended: {left:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The other sessions on the round's database (PostgreSQL: any but ours, among them every
/// `dirthara ...` application; MariaDB: any process-list row for the database but ours;
/// MongoDB, whose connections name no database: any connection whose application name is
/// one of the round's runners', `dirthara <command> <host>:<pid>`).
async fn sessions(kind: Kind, db: &TestDb, runners: &[u32]) -> Vec<String> {
    match kind {
        Kind::Postgres => {
            db.strings(
                "SELECT pid::text || ' ' || coalesce(application_name, '') || ' ' || coalesce(state, '') \
                 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .await
        }
        Kind::Mysql => {
            db.strings(&format!(
                "SELECT CONCAT(ID, ' ', COMMAND, ' ', COALESCE(INFO, '')) FROM information_schema.PROCESSLIST \
                 WHERE DB = '{}' AND ID <> CONNECTION_ID()",
                db.name
            ))
            .await
        }
        Kind::Mongo => {
            use mongodb::bson::doc;
            let client = mongo_client(&db.url).await.unwrap();
            let reply = client
                .database("admin")
                .run_command(doc! { "currentOp": 1, "$all": true })
                .await
                .unwrap();
            let mut left = Vec::new();
            for op in reply.get_array("inprog").cloned().unwrap_or_default() {
                let Some(op) = op.as_document() else { continue };
                let app = op
                    .get_str("appName")
                    .ok()
                    .or_else(|| {
                        op.get_document("clientMetadata")
                            .ok()?
                            .get_document("application")
                            .ok()?
                            .get_str("name")
                            .ok()
                    })
                    .unwrap_or("");
                let pid = app.rsplit(':').next().and_then(|p| p.parse::<u32>().ok());
                if app.starts_with("dirthara ") && pid.is_some_and(|p| runners.contains(&p)) {
                    left.push(format!("{app}: {}", op.get_str("op").unwrap_or("")));
                }
            }
            left
        }
        Kind::Sqlite => Vec::new(),
    }
}

/// The database's state, read in one snapshot.
pub(crate) async fn read(kind: Kind, place: &Place) -> Snapshot {
    match (kind, place) {
        (_, Place::Sqlite(_)) => sqlite(place).await,
        (Kind::Postgres, Place::Server(db)) => postgres(db).await,
        (Kind::Mysql, Place::Server(db)) => mysql(db).await,
        (Kind::Mongo, Place::Server(db)) => mongo(db).await,
        (Kind::Sqlite, Place::Server(_)) => unreachable!("SQLite runs in a file"),
    }
}

async fn sqlite(place: &Place) -> Snapshot {
    let mut c = sqlx::SqliteConnection::connect(&place.url()).await.unwrap();
    // One read transaction: SQLite reads a single version of the file throughout.
    c.execute("BEGIN").await.unwrap();
    let names: Vec<String> = c
        .fetch_all("SELECT name FROM sqlite_master WHERE type = 'table'")
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut snapshot = Snapshot {
        markers: names.iter().filter_map(|n| marker_version(n)).collect(),
        ..Snapshot::default()
    };
    for r in c
        .fetch_all("SELECT version, COUNT(*) FROM chaos_effects GROUP BY version")
        .await
        .unwrap()
    {
        snapshot
            .rows
            .insert(r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64);
    }
    if names.iter().any(|n| n == "dirthara_migrations") {
        for r in c
            .fetch_all("SELECT version, state FROM dirthara_migrations")
            .await
            .unwrap()
        {
            snapshot.states.insert(r.get::<i64, _>(0) as u64, r.get(1));
        }
    }
    c.execute("COMMIT").await.unwrap();
    snapshot
}

async fn postgres(db: &TestDb) -> Snapshot {
    let mut c = PgConnection::connect(&db.url).await.unwrap();
    c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .unwrap();
    let names: Vec<String> = c
        .fetch_all("SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'")
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut snapshot = Snapshot {
        markers: names.iter().filter_map(|n| marker_version(n)).collect(),
        ..Snapshot::default()
    };
    for r in c
        .fetch_all("SELECT version::bigint, count(*) FROM chaos_effects GROUP BY version")
        .await
        .unwrap()
    {
        snapshot
            .rows
            .insert(r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64);
    }
    if names.iter().any(|n| n == "dirthara_migrations") {
        for r in c
            .fetch_all("SELECT version::bigint, state::text FROM dirthara_migrations")
            .await
            .unwrap()
        {
            snapshot.states.insert(r.get::<i64, _>(0) as u64, r.get(1));
        }
    }
    // Sequences stand outside transactions: their current values, whatever the snapshot.
    let mut executions = BTreeMap::new();
    for r in c
        .fetch_all(
            "SELECT substr(sequencename, 12)::bigint, coalesce(last_value, 0) FROM pg_sequences \
             WHERE schemaname = 'public' AND sequencename LIKE 'chaos\\_exec\\_%'",
        )
        .await
        .unwrap()
    {
        executions.insert(r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64);
    }
    snapshot.executions = Some(executions);
    c.execute("COMMIT").await.unwrap();
    snapshot
}

async fn mysql(db: &TestDb) -> Snapshot {
    let mut c = MySqlConnection::connect(&db.url).await.unwrap();
    c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    c.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .await
        .unwrap();
    let text = |r: &sqlx::mysql::MySqlRow, i: usize| -> String {
        // MariaDB reports some computed text columns as VARBINARY.
        r.try_get::<String, _>(i)
            .unwrap_or_else(|_| String::from_utf8(r.get::<Vec<u8>, _>(i)).unwrap())
    };
    let names: Vec<String> = c
        .fetch_all(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE()",
        )
        .await
        .unwrap()
        .iter()
        .map(|r| text(r, 0))
        .collect();
    let mut snapshot = Snapshot {
        markers: names.iter().filter_map(|n| marker_version(n)).collect(),
        ..Snapshot::default()
    };
    for r in c
        .fetch_all(
            "SELECT CAST(version AS SIGNED), CAST(COUNT(*) AS SIGNED) FROM chaos_effects GROUP BY version",
        )
        .await
        .unwrap()
    {
        snapshot.rows.insert(r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64);
    }
    if names.iter().any(|n| n == "dirthara_migrations") {
        for r in c
            .fetch_all(
                "SELECT CAST(version AS SIGNED), CAST(state AS CHAR) FROM dirthara_migrations",
            )
            .await
            .unwrap()
        {
            snapshot
                .states
                .insert(r.get::<i64, _>(0) as u64, text(&r, 1));
        }
    }
    // MyISAM is outside the snapshot: its current contents.
    let mut executions = BTreeMap::new();
    for r in c
        .fetch_all(
            "SELECT CAST(version AS SIGNED), CAST(COUNT(*) AS SIGNED) FROM chaos_exec GROUP BY version",
        )
        .await
        .unwrap()
    {
        executions.insert(r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64);
    }
    snapshot.executions = Some(executions);
    c.execute("COMMIT").await.unwrap();
    snapshot
}

/// MongoDB: the history, effects and counters in one snapshot transaction (read concern
/// `snapshot`) where the server offers it; else read again until two reads agree. The
/// collection list (the markers) cannot be read in a transaction, and is read beside it.
async fn mongo(db: &TestDb) -> Snapshot {
    let mut previous = None;
    let started = Instant::now();
    loop {
        let (snapshot, in_one_snapshot) = mongo_once(db).await;
        if in_one_snapshot || previous.as_ref() == Some(&snapshot) {
            return snapshot;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "MongoDB reads never agreed: {snapshot:?}"
        );
        previous = Some(snapshot);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn mongo_once(db: &TestDb) -> (Snapshot, bool) {
    use mongodb::bson::{doc, Bson, Document};
    use mongodb::options::ReadConcern;
    let client = mongo_client(&db.url).await.unwrap();
    let database = client.database(&db.name);
    let mut snapshot = Snapshot {
        markers: database
            .list_collection_names()
            .await
            .unwrap()
            .iter()
            .filter_map(|n| marker_version(n))
            .collect(),
        ..Snapshot::default()
    };
    let number = |b: Option<&Bson>| match b {
        Some(Bson::Int32(n)) => *n as u64,
        Some(Bson::Int64(n)) => *n as u64,
        Some(Bson::Double(n)) => *n as u64,
        other => panic!("not a number: {other:?}"),
    };
    let mut session = client.start_session().await.unwrap();
    let in_one_snapshot = session
        .start_transaction()
        .read_concern(ReadConcern::snapshot())
        .await
        .is_ok();
    let mut read = async |name: &str| -> Vec<Document> {
        let collection = database.collection::<Document>(name);
        let mut docs = Vec::new();
        if in_one_snapshot {
            let mut cursor = collection
                .find(doc! {})
                .session(&mut session)
                .await
                .unwrap();
            while cursor.advance(&mut session).await.unwrap() {
                docs.push(cursor.deserialize_current().unwrap());
            }
        } else {
            let mut cursor = collection.find(doc! {}).await.unwrap();
            while cursor.advance().await.unwrap() {
                docs.push(cursor.deserialize_current().unwrap());
            }
        }
        docs
    };
    let history = read("dirthara_migrations").await;
    let effects = read("chaos_effects").await;
    let counters = read("chaos_exec").await;
    if in_one_snapshot {
        session.commit_transaction().await.unwrap();
    }
    for d in history {
        let state = d.get_str("state").unwrap_or("?").to_string();
        snapshot.states.insert(number(d.get("_id")), state);
    }
    for d in effects {
        *snapshot.rows.entry(number(d.get("version"))).or_insert(0) += 1;
    }
    snapshot.executions = Some(
        counters
            .iter()
            .map(|d| (number(d.get("_id")), number(d.get("n"))))
            .collect(),
    );
    (snapshot, in_one_snapshot)
}
