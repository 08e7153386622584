//! An in-memory backend for the engine's tests: instant, and it records every call so tests
//! can check the order of lock, read and write.
//!
//! Step text is a tiny language, one command per line: `create NAME`, `drop NAME`,
//! `fail MESSAGE`, `lose-lock` (another operator takes the lock away), `steal-lease`
//! (another runner takes over the lease); a line starting with `--` is a comment.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    Backend, BackendKind, Capabilities, ConnectRequest, Connector, Prepared, Step, StepBody,
    StepFailure,
};
use crate::error::{DatabaseError, Error, Result};
use crate::events::EventSink;
use crate::history::{
    AppliedMigration, AppliedRepeatable, HistoryChange, HistoryDigest, RecordState,
    RepeatableChange,
};
use crate::lock::{LeaseStore, LockHost, LockSupport, SessionLock};

#[derive(Debug, Default)]
pub(crate) struct MemoryDb {
    pub tables: BTreeSet<String>,
    /// The history in the default table; `None`: no history table yet.
    pub history: Option<BTreeMap<i64, AppliedMigration>>,
    /// The histories in tables of other names (`history_table`), by name.
    pub other_histories: BTreeMap<String, Option<BTreeMap<i64, AppliedMigration>>>,
    pub lock_holder: Option<u64>,
    /// Every call, in order: `connect`, `lock`, `read`, `prepare`, `step on default`,
    /// `record` (`record x2`: one write of two changes), `unlock`, ...
    pub calls: Vec<String>,
    pub fail_unlock: bool,
    pub next_session: u64,
    /// Whether steps and records share a transaction (PostgreSQL-like) or not (MySQL-like).
    pub non_transactional: bool,
    /// Folds each step's completion into the next marker (MySQL-like).
    pub folds_records: bool,
    /// Atomic steps carry the session-lock check (PostgreSQL-like).
    pub checks_lock_in_step: bool,
    /// The server fakes its session lock (CockroachDB-like): `locking = true` must take the
    /// lease instead, and say so.
    pub fakes_session_lock: bool,
    /// Markers carry the session-lock check (MySQL-like).
    pub checks_lock_in_marker: bool,
    /// Steps that carried the lock check, by number of the call (`step+record` calls).
    pub lock_checked_steps: usize,
    /// History writes fail from now on (the step `break-history`: the history connection
    /// was lost while a step ran elsewhere).
    pub history_broken: bool,
    /// Steps wait for table locks that queue the application (PostgreSQL-like).
    pub table_locks: bool,
    /// How many more attempts of a `wait-lock` step give way (time out on their table lock).
    pub blocked_attempts: u32,
    /// The table-lock timeout each step attempt was run with, in order.
    pub lock_timeouts: Vec<Option<Duration>>,
    /// An attempt that gives way names its blocker, session 4127, whose transaction ends
    /// once `blocked_attempts` runs out (what a pause between attempts watches for).
    pub blocker_named: bool,
    pub lease: crate::lock::lease::memory::MemoryLeaseStore,
    /// The repeatable migrations' records, by name.
    pub repeatables: BTreeMap<String, AppliedRepeatable>,
}

impl MemoryDb {
    /// The history kept in `table`.
    fn history_in(&mut self, table: &str) -> &mut Option<BTreeMap<i64, AppliedMigration>> {
        if table == crate::history::DEFAULT_HISTORY_TABLE {
            &mut self.history
        } else {
            self.other_histories.entry(table.to_string()).or_default()
        }
    }
}

pub(crate) type SharedDb = Arc<Mutex<MemoryDb>>;

pub(crate) struct MemoryConnector(pub SharedDb);

#[async_trait]
impl Connector for MemoryConnector {
    async fn connect(
        &self,
        request: &ConnectRequest,
        _events: &EventSink,
    ) -> Result<Box<dyn Backend>> {
        let mut db = self.0.lock().unwrap();
        db.next_session += 1;
        db.calls.push(format!("connect {}", request.name));
        Ok(Box::new(MemoryBackend {
            db: self.0.clone(),
            session: db.next_session,
            connection: request.name.clone(),
            history_table: request.history_table.clone(),
        }))
    }
}

pub(crate) struct MemoryBackend {
    db: SharedDb,
    session: u64,
    connection: String,
    history_table: String,
}

impl MemoryBackend {
    fn with<T>(&self, f: impl FnOnce(&mut MemoryDb) -> T) -> T {
        f(&mut self.db.lock().unwrap())
    }
}

fn run_text(db: &mut MemoryDb, text: &str) -> std::result::Result<(), String> {
    let commands = (text.lines().map(str::trim)).filter(|l| !l.is_empty() && !l.starts_with("--"));
    for line in commands {
        let (word, arg) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "create" if !db.tables.insert(arg.to_string()) => {
                return Err(format!("table {arg} already exists"))
            }
            "drop" if !db.tables.remove(arg) => return Err(format!("no table {arg}")),
            "create" | "drop" => {}
            "fail" => return Err(arg.to_string()),
            "lose-lock" => db.lock_holder = Some(u64::MAX),
            // Another runner force-unlocks and takes the lease.
            "steal-lease" => db.lease.put_owner("thief"),
            "break-history" => db.history_broken = true,
            // Waited for its table lock and got it (see `blocked_attempts`).
            "wait-lock" => {}
            other => return Err(format!("unknown memory command `{other}`")),
        }
    }
    Ok(())
}

fn apply_change(history: &mut Option<BTreeMap<i64, AppliedMigration>>, change: &HistoryChange) {
    let history = history.get_or_insert_with(BTreeMap::new);
    match change.measured(Duration::ZERO) {
        HistoryChange::Insert(record) => {
            history.insert(
                record.version,
                AppliedMigration {
                    version: record.version,
                    name: record.name,
                    checksum: record.checksum,
                    batch: record.batch,
                    state: record.state,
                    applied_at: "2024-01-01T00:00:00Z".into(),
                    duration_ms: record.duration_ms.unwrap_or(0),
                    applied_by: record.applied_by,
                    failure: None,
                },
            );
        }
        HistoryChange::MarkApplied { version, .. } => {
            if let Some(r) = history.get_mut(&version) {
                r.state = crate::history::RecordState::Applied;
                r.failure = None;
            }
        }
        HistoryChange::SetState { version, state } => {
            if let Some(r) = history.get_mut(&version) {
                r.state = state;
                r.failure = None;
            }
        }
        HistoryChange::RecordFailure { version, failure } => {
            if let Some(r) = history.get_mut(&version) {
                r.failure = Some(failure);
            }
        }
        HistoryChange::SetChecksum { version, checksum } => {
            if let Some(r) = history.get_mut(&version) {
                r.checksum = checksum;
            }
        }
        HistoryChange::Delete { version } => {
            history.remove(&version);
        }
    }
}

#[async_trait]
impl LockHost for MemoryBackend {
    fn lock_support(&self) -> LockSupport {
        let mut support = BackendKind::Memory.lock_support();
        if self.with(|db| db.fakes_session_lock) {
            support.database = "CockroachDB";
            support.session_lock = crate::lock::SessionLockSupport::Unreliable {
                server: "CockroachDB",
                reason: "its advisory-lock functions are documented no-ops",
            };
        }
        support
    }

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        Some(self)
    }

    async fn lease_store(&mut self, _create: bool) -> Result<Option<Box<dyn LeaseStore>>> {
        Ok(Some(Box::new(self.with(|db| db.lease.clone()))))
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    fn capabilities(&self) -> Capabilities {
        self.with(|db| {
            let mut capabilities = BackendKind::Memory.capabilities();
            capabilities.transactional_ddl = !db.non_transactional;
            capabilities.folds_records = db.folds_records;
            capabilities.table_locks = db.table_locks;
            // Read as the SQL database it stands in for: one with transactional DDL, or not.
            capabilities.sql_dialect = Some(match db.non_transactional {
                false => crate::source::sql::SqlDialect::Postgres,
                true => crate::source::sql::SqlDialect::MySql,
            });
            capabilities
        })
    }

    fn lock_host(&mut self) -> &mut dyn LockHost {
        self
    }

    async fn read_history(&mut self) -> Result<Option<Vec<AppliedMigration>>> {
        let table = self.history_table.clone();
        Ok(self.with(|db| {
            db.calls.push("read".into());
            let history = db.history_in(&table);
            history.as_ref().map(|h| h.values().cloned().collect())
        }))
    }

    async fn prepare_history(&mut self) -> Result<Vec<AppliedMigration>> {
        let table = self.history_table.clone();
        Ok(self.with(|db| {
            db.calls.push("prepare".into());
            db.history_in(&table)
                .get_or_insert_with(BTreeMap::new)
                .values()
                .cloned()
                .collect()
        }))
    }

    async fn prepare_history_expecting(&mut self, expected: &HistoryDigest) -> Result<Prepared> {
        let digest = self.with(|db| {
            let records = db.history.get_or_insert_with(BTreeMap::new);
            HistoryDigest {
                records: records.len() as u64,
                newest: records.keys().next_back().copied(),
                not_applied: (records.values())
                    .filter(|r| r.state != RecordState::Applied)
                    .count() as u64,
                hash: HistoryDigest::hash_pairs(
                    (records.values()).map(|r| (r.version, r.checksum.as_str())),
                ),
            }
        });
        if digest.proves_up_to_date(expected) {
            self.with(|db| db.calls.push("digest".into()));
            return Ok(Prepared::AsExpected);
        }
        self.prepare_history().await.map(Prepared::Records)
    }

    async fn run(&mut self, step: Step<'_>) -> std::result::Result<(), StepFailure> {
        let text = match step.body {
            StepBody::Text(text, _) => text,
            StepBody::Code(..) => {
                return Err(StepFailure::refused(
                    "memory connections cannot run Rust migrations",
                ))
            }
        };
        // `wait-lock`: the step's statement waits for a table lock another session holds;
        // while `blocked_attempts` lasts, it gives way after its timeout, undone.
        let gave_way = self.with(|db| {
            db.lock_timeouts.push(step.lock_timeout);
            let waits = text.lines().any(|l| l.trim() == "wait-lock") && db.blocked_attempts > 0;
            if waits && step.lock_timeout.is_some() {
                db.blocked_attempts -= 1;
                db.calls.push("gave way".into());
            }
            waits && step.lock_timeout.is_some()
        });
        if gave_way {
            // It waited its whole timeout first.
            tokio::time::sleep(step.lock_timeout.unwrap_or_default()).await;
            let mut error = DatabaseError::from_message("canceling statement due to lock timeout");
            error.lock_not_available = true;
            error.table = Some("users".into());
            if self.with(|db| db.blocker_named) {
                error.blocker = Some({
                    let mut blocker = crate::events::Blocker::default();
                    blocker.session_id = Some(4127);
                    blocker.transaction = Some("t0".into());
                    blocker
                });
            }
            return Err(StepFailure {
                nothing_changed: true,
                statement: Some(0),
                ..StepFailure::new(error)
            });
        }
        let Some(change) = step.record else {
            let connection = self.connection.clone();
            return self.with(|db| {
                db.calls.push(format!("step on {connection}"));
                // In a transaction of its own where the database has them: undone on failure.
                let undone = step.transactional && !db.non_transactional;
                let saved = db.tables.clone();
                run_text(db, text).map_err(|message| {
                    if undone {
                        db.tables = saved;
                    }
                    StepFailure {
                        nothing_changed: undone,
                        ..StepFailure::new(DatabaseError::from_message(message))
                    }
                })
            });
        };
        let (session, table) = (self.session, self.history_table.clone());
        self.with(|db| {
            db.calls.push("step+record".into());
            if step.checks_lock {
                db.lock_checked_steps += 1;
            }
            // All or nothing: run against a copy of the tables, keep it only on success.
            let saved = db.tables.clone();
            let lock_gone = step.checks_lock && db.lock_holder != Some(session);
            match run_text(db, text) {
                // Like PostgreSQL's in-step guard: the whole step rolls back.
                Ok(()) if lock_gone => {
                    db.tables = saved;
                    Err(StepFailure::new(DatabaseError::from_message(
                        "dirthara: this session no longer holds the migration lock",
                    )))
                }
                Ok(()) => {
                    apply_change(db.history_in(&table), change);
                    Ok(())
                }
                Err(e) => {
                    db.tables = saved;
                    Err(StepFailure::new(DatabaseError::from_message(e)))
                }
            }
        })
    }

    async fn record_guarded(&mut self, changes: &[HistoryChange]) -> Result<bool> {
        let Some((marker, earlier)) = changes.split_last() else {
            return Ok(true);
        };
        if !earlier.is_empty() {
            self.record(earlier).await?;
        }
        let (session, table) = (self.session, self.history_table.clone());
        Ok(self.with(|db| {
            db.calls.push("guarded marker".into());
            let held = db.lock_holder == Some(session);
            if held {
                apply_change(db.history_in(&table), marker);
            }
            held
        }))
    }

    async fn blocker_gone(&mut self, blocker: &crate::events::Blocker) -> Option<bool> {
        let named = blocker.session_id == Some(4127);
        self.with(|db| (db.blocker_named && named).then_some(db.blocked_attempts == 0))
    }

    async fn read_repeatables(&mut self) -> Result<Vec<AppliedRepeatable>> {
        Ok(self.with(|db| db.repeatables.values().cloned().collect()))
    }

    async fn record_repeatable(&mut self, change: &RepeatableChange) -> Result<()> {
        self.with(|db| {
            db.calls.push("record repeatable".to_string());
            let (name, replaced) = match change {
                RepeatableChange::Running { name, checksum, .. } => {
                    (name, Some((checksum, RecordState::Running)))
                }
                RepeatableChange::Adopted { name, checksum, .. } => {
                    (name, Some((checksum, RecordState::Applied)))
                }
                RepeatableChange::Applied { name, .. } | RepeatableChange::Failed { name, .. } => {
                    (name, None)
                }
            };
            if let Some((checksum, state)) = replaced {
                let record = AppliedRepeatable::new(name.clone(), checksum.clone(), state);
                db.repeatables.insert(name.clone(), record);
            }
            let record = db.repeatables.get_mut(name).expect("written before");
            match change {
                RepeatableChange::Applied { .. } => record.state = RecordState::Applied,
                RepeatableChange::Failed { failure, .. } => record.failure = Some(failure.clone()),
                _ => {}
            }
        });
        Ok(())
    }

    async fn record(&mut self, changes: &[HistoryChange]) -> Result<()> {
        if self.with(|db| db.history_broken) {
            return Err(Error::history("default", "the history connection was lost"));
        }
        let table = self.history_table.clone();
        self.with(|db| {
            // One write, however many changes it carries: `record`, or `record xN`.
            db.calls.push(match changes.len() {
                1 => "record".to_string(),
                n => format!("record x{n}"),
            });
            for change in changes {
                apply_change(db.history_in(&table), change);
            }
        });
        Ok(())
    }

    async fn drop_all(&mut self) -> Result<Vec<String>> {
        let keep = crate::lock::lease_table(&self.history_table);
        Ok(self.with(|db| {
            db.calls.push("drop_all".into());
            let dropped: Vec<String> = db.tables.iter().filter(|t| **t != keep).cloned().collect();
            db.tables.retain(|t| *t == keep);
            db.history = None;
            db.other_histories.clear();
            dropped
        }))
    }

    async fn close(self: Box<Self>) {
        let session = self.session;
        self.with(|db| {
            db.calls.push("close".into());
            // Like a database session ending: its lock goes with it.
            if db.lock_holder == Some(session) {
                db.lock_holder = None;
            }
        });
    }
}

mod session_lock;
