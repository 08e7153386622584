//! The chaos test's view of the truth: which migrations took effect (markers and
//! `chaos_effects` rows, read from the database itself), what the history says (`status`),
//! and the check that the two agree. Also restarting a server and waiting for it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, Row};

use crate::support::servers::{Server, TestDb};
use crate::support::{dirthara, text, Migrations};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Postgres,
    Mysql,
    Sqlite,
    Mongo,
}

/// Where one round runs: a fresh SQLite file or a fresh server database.
pub enum Place {
    Sqlite(tempfile::TempDir),
    Server(TestDb),
}

impl Place {
    pub fn url(&self) -> String {
        match self {
            Place::Sqlite(dir) => format!("sqlite:{}", dir.path().join("chaos.db").display()),
            Place::Server(db) => db.url.clone(),
        }
    }
}

/// What the database holds: the markers that exist, and `chaos_effects` rows per version.
pub struct Effects {
    pub markers: Vec<u64>,
    pub rows: BTreeMap<u64, u64>,
}

fn marker_version(name: &str) -> Option<u64> {
    name.strip_prefix('m')?.parse().ok()
}

pub async fn effects(kind: Kind, place: &Place) -> Effects {
    let (names, pairs): (Vec<String>, Vec<(u64, u64)>) = match place {
        Place::Sqlite(_) => {
            let mut c = sqlx::SqliteConnection::connect(&place.url()).await.unwrap();
            let names = c
                .fetch_all("SELECT name FROM sqlite_master WHERE type = 'table'")
                .await
                .unwrap();
            let rows = c
                .fetch_all("SELECT version, COUNT(*) FROM chaos_effects GROUP BY version")
                .await
                .unwrap();
            (
                names.iter().map(|r| r.get::<String, _>(0)).collect(),
                rows.iter()
                    .map(|r| (r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64))
                    .collect(),
            )
        }
        Place::Server(db) if kind == Kind::Mongo => {
            use mongodb::bson::{doc, Document};
            let mongo = db.mongo().await;
            let mut rows = BTreeMap::new();
            let mut cursor = mongo
                .collection::<Document>("chaos_effects")
                .find(doc! {})
                .await
                .unwrap();
            while cursor.advance().await.unwrap() {
                let d = cursor.deserialize_current().unwrap();
                let v = d
                    .get_i32("version")
                    .map(i64::from)
                    .or_else(|_| d.get_i64("version"));
                *rows.entry(v.unwrap() as u64).or_insert(0) += 1;
            }
            (db.tables().await, rows.into_iter().collect())
        }
        Place::Server(db) => {
            let sql = if kind == Kind::Postgres {
                "SELECT version::text || ' ' || count(*)::text FROM chaos_effects GROUP BY version"
            } else {
                "SELECT CONCAT(version, ' ', COUNT(*)) FROM chaos_effects GROUP BY version"
            };
            let rows = db.strings(sql).await.into_iter().map(|line| {
                let (v, n) = line.split_once(' ').unwrap();
                (v.parse().unwrap(), n.parse().unwrap())
            });
            (db.tables().await, rows.collect())
        }
    };
    let mut markers: Vec<u64> = names.iter().filter_map(|n| marker_version(n)).collect();
    markers.sort_unstable();
    Effects {
        markers,
        rows: pairs.into_iter().collect(),
    }
}

/// Migration states as `status --output json` reports them.
pub fn states(url: &str, m: &Migrations, extra: &[&str]) -> BTreeMap<u64, String> {
    let mut args = vec!["status", "--output", "json"];
    args.extend_from_slice(extra);
    let out = dirthara(url, m.path(), &args).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("status is not JSON ({e}): {:?}", text(&out)));
    doc["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let state = m["state"].as_str().unwrap().to_string();
            (m["version"].as_u64().unwrap(), state)
        })
        .collect()
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub applied: usize,
    pub absent: usize,
    pub dirty: usize,
}

/// The truth check. `finished`: after the clean run, everything must be applied.
pub async fn checkpoint(
    kind: Kind,
    place: &Place,
    m: &Migrations,
    n: u64,
    extra: &[&str],
    finished: bool,
) -> Outcome {
    let states = states(&place.url(), m, extra);
    let effects = effects(kind, place).await;
    let mut outcome = Outcome::default();
    let context = || {
        format!(
            "{kind:?} states {states:?} markers {:?} rows {:?}",
            effects.markers, effects.rows
        )
    };
    for v in 1..=n {
        let marker = effects.markers.contains(&v);
        let rows = effects.rows.get(&v).copied().unwrap_or(0);
        assert!(
            rows <= 1,
            "migration {v} applied {rows} times: {}",
            context()
        );
        match states.get(&v).map(String::as_str) {
            Some("applied") => {
                outcome.applied += 1;
                assert!(
                    marker,
                    "migration {v} recorded without its effect: {}",
                    context()
                );
                // A resolved DIRTY (`--applied`) may lack the row its step never reached.
                if !finished {
                    assert_eq!(
                        rows,
                        1,
                        "migration {v} recorded, effect incomplete: {}",
                        context()
                    );
                }
            }
            Some("pending") => {
                outcome.absent += 1;
                assert!(
                    !marker && rows == 0,
                    "migration {v} took effect unrecorded: {}",
                    context()
                );
            }
            Some("dirty") => outcome.dirty += 1,
            other => panic!("migration {v} in state {other:?}: {}", context()),
        }
    }
    assert!(
        outcome.dirty <= 1,
        "more than one running record: {}",
        context()
    );
    if finished {
        assert_eq!(outcome.applied as u64, n, "{}", context());
    }
    outcome
}

pub fn restart_server(kind: Kind) {
    let sh = |script: &str| {
        let out = Command::new("sh").arg("-c").arg(script).output().unwrap();
        (out.status.success(), format!("{script}: {:?}", text(&out)))
    };
    match kind {
        Kind::Postgres => {
            let (ok, log) = sh("pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart -m fast");
            assert!(ok, "{log}");
        }
        Kind::Mysql => {
            let _ = sh("mysqladmin -uroot --protocol=tcp shutdown");
            let started = Instant::now();
            // Starting while the old server still exits would find it "already running".
            while sh("start-stop-daemon --status --exec /usr/sbin/mariadbd").0 {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "mariadbd does not stop"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            let (ok, log) =
                sh("start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd");
            assert!(ok, "{log}");
        }
        _ => unreachable!("only server backends restart"),
    }
}

/// Waits until the server accepts a query again after a restart.
pub async fn wait_until_answering(place: &Place) {
    let Place::Server(db) = place else { return };
    let started = Instant::now();
    loop {
        let ok = match db.server {
            Server::Postgres => match sqlx::PgConnection::connect(&db.url).await {
                Ok(mut c) => c.execute("SELECT 1").await.is_ok(),
                Err(_) => false,
            },
            Server::Mysql => match sqlx::MySqlConnection::connect(&db.url).await {
                Ok(mut c) => c.execute("SELECT 1").await.is_ok(),
                Err(_) => false,
            },
            Server::Mongo => return,
        };
        if ok {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the server never came back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
