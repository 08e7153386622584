//! MongoDB, on the official driver: the history in a collection (`_id` = version), JSON
//! command migrations run with `runCommand`, and the lease lock (MongoDB has no session
//! lock) in `<history>_lock`.
//!
//! Steps that are not declared `"transaction": true` cannot share a transaction with their
//! record, so they are bracketed by a `running` record, like MySQL's DDL.

use std::time::Duration;

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, DateTime, Document};
use mongodb::error::{ErrorKind as MongoErrorKind, WriteFailure};
use mongodb::options::ClientOptions;
use mongodb::{Client, ClientSession, Collection, Database};

use super::{session_label, Backend, BackendKind, ConnectFailure, ConnectRequest, StepFailure};
use crate::code::{Connection, RustMigration};
use crate::error::{DatabaseError, Error, Result};
use crate::history::{
    check_layout, foreign_history, AppliedMigration, HistoryChange, RecordState,
    HISTORY_LAYOUT_VERSION,
};
use crate::lock::lease::LeaseStore;
use crate::migration::Direction;
use crate::source::parse_commands;

mod lease;

pub(crate) struct MongoBackend {
    client: Client,
    db: Database,
    connection: String,
}

pub(crate) async fn connect(request: &ConnectRequest) -> Result<Box<dyn Backend>, ConnectFailure> {
    let mut options = ClientOptions::parse(&request.url)
        .await
        .map_err(|e| ConnectFailure {
            message: format!("invalid MongoDB URL: {}", mongo_message(&e)),
            // An SRV lookup that failed may succeed once DNS is up.
            transient: matches!(*e.kind, MongoErrorKind::DnsResolve { .. }),
        })?;
    options.app_name = Some(session_label(&request.operation));
    // Fail each attempt quickly; the connector retries up to --connect-timeout.
    let attempt = request
        .connect_timeout
        .clamp(Duration::from_millis(200), Duration::from_secs(2));
    options.server_selection_timeout = Some(attempt);
    options.connect_timeout = Some(attempt);
    let Some(database) = options.default_database.clone() else {
        return Err(ConnectFailure {
            message: "no database name in the URL's path (write it as mongodb://host/app)".into(),
            transient: false,
        });
    };
    let client = Client::with_options(options).map_err(|e| ConnectFailure {
        message: mongo_message(&e),
        transient: false,
    })?;
    let db = client.database(&database);
    if let Err(e) = db.run_command(doc! { "ping": 1 }).await {
        let transient = matches!(
            *e.kind,
            MongoErrorKind::ServerSelection { .. }
                | MongoErrorKind::Io(_)
                | MongoErrorKind::ConnectionPoolCleared { .. }
        );
        return Err(ConnectFailure {
            message: mongo_message(&e),
            transient,
        });
    }
    Ok(Box::new(MongoBackend {
        client,
        db,
        connection: request.name.clone(),
    }))
}

/// The server's message (and code) for an error, without the driver's wrapping.
pub(crate) fn mongo_message(error: &mongodb::error::Error) -> String {
    match &*error.kind {
        MongoErrorKind::Command(c) => format!("{} (code {})", c.message, c.code),
        MongoErrorKind::Write(WriteFailure::WriteError(w)) => {
            format!("{} (code {})", w.message, w.code)
        }
        MongoErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            format!("write concern: {} (code {})", w.message, w.code)
        }
        _ => error.to_string(),
    }
}

/// The server error code, whichever way the driver reports it.
pub(crate) fn mongo_code(error: &mongodb::error::Error) -> Option<i32> {
    match &*error.kind {
        MongoErrorKind::Command(c) => Some(c.code),
        MongoErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        MongoErrorKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code),
        _ => None,
    }
}

/// Turns a JSON command migration into BSON command documents (Extended JSON v2).
fn commands(text: &str) -> std::result::Result<(Vec<Document>, bool), String> {
    let parsed = parse_commands(text)?;
    let mut documents = Vec::with_capacity(parsed.commands.len());
    for (index, command) in parsed.commands.into_iter().enumerate() {
        match Bson::try_from(serde_json::Value::Object(command)) {
            Ok(Bson::Document(document)) => documents.push(document),
            Ok(_) => return Err(format!("command #{} is not a document", index + 1)),
            Err(e) => {
                return Err(format!(
                    "command #{} is not valid Extended JSON: {e}",
                    index + 1
                ))
            }
        }
    }
    Ok((documents, parsed.transaction))
}

/// A command's reply can say `ok: 1` and still report failed writes.
fn check_reply(index: usize, reply: &Document) -> std::result::Result<(), String> {
    if let Ok(errors) = reply.get_array("writeErrors") {
        if let Some(Bson::Document(first)) = errors.first() {
            return Err(format!(
                "command #{}: write error: {} (code {})",
                index + 1,
                first.get_str("errmsg").unwrap_or("unknown"),
                first.get_i32("code").unwrap_or_default()
            ));
        }
    }
    if let Ok(concern) = reply.get_document("writeConcernError") {
        return Err(format!(
            "command #{}: write concern error: {}",
            index + 1,
            concern.get_str("errmsg").unwrap_or("unknown")
        ));
    }
    Ok(())
}

impl MongoBackend {
    fn history(&self, table: &str) -> Collection<Document> {
        self.db.collection(table)
    }

    fn error(&self, error: mongodb::error::Error) -> Error {
        Error::history(&self.connection, mongo_message(&error))
    }

    async fn existing(&self, table: &str) -> Result<(bool, bool)> {
        let meta = format!("{table}_meta");
        let names = self
            .db
            .list_collection_names()
            .filter(doc! { "name": { "$in": [table, &meta] } })
            .await
            .map_err(|e| self.error(e))?;
        Ok((names.iter().any(|n| n == table), names.contains(&meta)))
    }

    async fn layout_version(&self, table: &str) -> Result<i64> {
        let meta = self.db.collection::<Document>(&format!("{table}_meta"));
        let found = meta
            .find_one(doc! { "_id": "layout_version" })
            .await
            .map_err(|e| self.error(e))?;
        found
            .and_then(|d| {
                d.get("value")
                    .and_then(Bson::as_i64)
                    .or_else(|| d.get_i32("value").ok().map(i64::from))
            })
            .ok_or_else(|| {
                Error::history(
                    &self.connection,
                    format!("`{table}_meta` has no readable layout_version"),
                )
            })
    }

    async fn run_commands(
        &self,
        documents: Vec<Document>,
        mut session: Option<&mut ClientSession>,
    ) -> std::result::Result<(), StepFailure> {
        for (index, command) in documents.into_iter().enumerate() {
            let reply = match session.as_deref_mut() {
                Some(session) => self.db.run_command(command).session(session).await,
                None => self.db.run_command(command).await,
            };
            let reply = reply.map_err(|e| {
                // The code goes in `number` (printed once, after the message).
                let text = match &*e.kind {
                    MongoErrorKind::Command(c) => c.message.clone(),
                    _ => mongo_message(&e),
                };
                let error = DatabaseError {
                    message: format!("command #{}: {text}", index + 1),
                    number: mongo_code(&e).map(i64::from),
                    connection_lost: matches!(*e.kind, MongoErrorKind::Io(_)),
                    ..DatabaseError::default()
                };
                // A command the server refused (`ok: 0`) changed nothing; if it was the
                // first, the migration changed nothing at all.
                let refused = matches!(*e.kind, MongoErrorKind::Command(_));
                StepFailure {
                    error: Box::new(error),
                    nothing_changed: refused && index == 0,
                }
            })?;
            check_reply(index, &reply)
                .map_err(|message| StepFailure::new(DatabaseError::from_message(message)))?;
        }
        Ok(())
    }

    async fn apply_change(
        &self,
        table: &str,
        change: &HistoryChange,
        session: Option<&mut ClientSession>,
    ) -> std::result::Result<(), mongodb::error::Error> {
        let history = self.history(table);
        let now = DateTime::now();
        macro_rules! run {
            ($action:expr) => {
                match session {
                    Some(s) => $action.session(s).await.map(|_| ()),
                    None => $action.await.map(|_| ()),
                }
            };
        }
        match change {
            HistoryChange::Insert {
                version,
                name,
                checksum,
                batch,
                state,
                duration_ms,
                applied_by,
            } => {
                let record = doc! {
                    "_id": *version,
                    "name": name,
                    "checksum": checksum,
                    "batch": *batch,
                    "state": state.as_str(),
                    "appliedAt": now,
                    "durationMs": duration_ms.unwrap_or(0),
                    "appliedBy": applied_by,
                };
                run!(history.insert_one(record))
            }
            HistoryChange::MarkApplied { version, duration_ms } => run!(history.update_one(
                doc! { "_id": *version },
                doc! { "$set": { "state": "applied", "durationMs": *duration_ms, "appliedAt": now } }
            )),
            HistoryChange::SetState { version, state } => run!(history.update_one(
                doc! { "_id": *version },
                doc! { "$set": { "state": state.as_str() } }
            )),
            HistoryChange::SetChecksum { version, checksum } => run!(history.update_one(
                doc! { "_id": *version },
                doc! { "$set": { "checksum": checksum } }
            )),
            HistoryChange::Delete { version } => run!(history.delete_one(doc! { "_id": *version })),
        }
    }

    /// A session with a transaction started (replica sets only).
    async fn begin(&self) -> std::result::Result<ClientSession, StepFailure> {
        let mut session = self
            .client
            .start_session()
            .await
            .map_err(|e| StepFailure::refused(mongo_message(&e)))?;
        session.start_transaction().await.map_err(|e| {
            StepFailure::refused(format!(
                "cannot start a transaction (a replica set is required): {}",
                mongo_message(&e)
            ))
        })?;
        Ok(session)
    }

    /// Runs the commands (and a history change) in one transaction on a replica set.
    async fn in_transaction(
        &self,
        documents: Vec<Document>,
        record: Option<(&str, HistoryChange)>,
    ) -> std::result::Result<(), StepFailure> {
        let started = std::time::Instant::now();
        let mut session = self.begin().await?;
        let mut result = self.run_commands(documents, Some(&mut session)).await;
        if let (Ok(()), Some((table, change))) = (&result, &record) {
            // Measured once the commands ran, inside the transaction the record commits with.
            let change = change.measured(started.elapsed());
            result = self
                .apply_change(table, &change, Some(&mut session))
                .await
                .map_err(|e| history_record_failure(&e));
        }
        end(session, result).await
    }
}

fn history_record_failure(error: &mongodb::error::Error) -> StepFailure {
    StepFailure::new(DatabaseError::from_message(format!(
        "history record: {}",
        mongo_message(error)
    )))
}

/// Commits what succeeded, aborts what did not; the step's own error wins.
async fn end(
    mut session: ClientSession,
    result: std::result::Result<(), StepFailure>,
) -> std::result::Result<(), StepFailure> {
    match result {
        Ok(()) => session
            .commit_transaction()
            .await
            .map_err(|e| StepFailure::new(DatabaseError::from_message(mongo_message(&e)))),
        Err(failure) => {
            let _ = session.abort_transaction().await;
            Err(failure)
        }
    }
}

fn parse_record(document: &Document) -> Option<AppliedMigration> {
    let int = |key: &str| {
        document
            .get(key)
            .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)))
    };
    Some(AppliedMigration {
        version: int("_id")?,
        name: document.get_str("name").ok()?.to_string(),
        checksum: document.get_str("checksum").ok()?.to_string(),
        batch: int("batch")?,
        state: RecordState::parse(document.get_str("state").ok()?)?,
        // Whole seconds, like the SQL backends: `...:05Z`, not `...:05.123Z`.
        applied_at: document
            .get_datetime("appliedAt")
            .ok()
            .and_then(|d| d.try_to_rfc3339_string().ok())
            .map(|text| match text.split_once('.') {
                Some((seconds, _)) => format!("{seconds}Z"),
                None => text,
            })
            .unwrap_or_default(),
        duration_ms: int("durationMs").unwrap_or(0),
        applied_by: document
            .get_str("appliedBy")
            .unwrap_or_default()
            .to_string(),
    })
}

#[async_trait]
impl Backend for MongoBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Mongo
    }

    fn connection(&self) -> &str {
        &self.connection
    }

    async fn read_history(&mut self, table: &str) -> Result<Option<Vec<AppliedMigration>>> {
        let (history, meta) = self.existing(table).await?;
        if meta {
            let layout = self.layout_version(table).await?;
            check_layout(&self.connection, table, layout)?;
        }
        if !history {
            return Ok(None);
        }
        if !meta {
            return Err(foreign_history(&self.connection, table));
        }
        let mut cursor = self
            .history(table)
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await
            .map_err(|e| self.error(e))?;
        let mut records = Vec::new();
        while cursor.advance().await.map_err(|e| self.error(e))? {
            let document = cursor.deserialize_current().map_err(|e| self.error(e))?;
            records.push(parse_record(&document).ok_or_else(|| {
                Error::history(
                    &self.connection,
                    format!("`{table}` has a malformed record: {document}"),
                )
            })?);
        }
        Ok(Some(records))
    }

    async fn prepare_history(&mut self, table: &str) -> Result<()> {
        let (history, meta) = self.existing(table).await?;
        if history && !meta {
            return Err(foreign_history(&self.connection, table));
        }
        if meta {
            let layout = self.layout_version(table).await?;
            check_layout(&self.connection, table, layout)?;
        } else {
            self.db
                .collection::<Document>(&format!("{table}_meta"))
                .insert_one(doc! { "_id": "layout_version", "value": HISTORY_LAYOUT_VERSION })
                .await
                .map_err(|e| self.error(e))?;
        }
        if !history {
            self.db
                .create_collection(table)
                .await
                .map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    /// A step declared `"transaction": true` commits with its record.
    fn transactional_ddl(&self) -> bool {
        true
    }

    async fn run_step(
        &mut self,
        text: &str,
        transactional: bool,
    ) -> std::result::Result<(), StepFailure> {
        let (documents, _) = commands(text).map_err(StepFailure::refused)?;
        if transactional {
            self.in_transaction(documents, None).await
        } else {
            self.run_commands(documents, None).await
        }
    }

    async fn run_step_recorded(
        &mut self,
        text: &str,
        table: &str,
        change: &HistoryChange,
    ) -> std::result::Result<(), StepFailure> {
        let (documents, _) = commands(text).map_err(StepFailure::refused)?;
        self.in_transaction(documents, Some((table, change.clone())))
            .await
    }

    async fn run_code(
        &mut self,
        code: &dyn RustMigration,
        direction: Direction,
        transactional: bool,
        record: Option<(&str, &HistoryChange)>,
    ) -> std::result::Result<(), StepFailure> {
        async fn step(
            code: &dyn RustMigration,
            direction: Direction,
            conn: Connection<'_>,
        ) -> std::result::Result<(), StepFailure> {
            match direction {
                Direction::Up => code.up(conn).await,
                Direction::Down => code.down(conn).await,
            }
            .map_err(|e| StepFailure::new(DatabaseError::from_message(e.to_string())))
        }
        if !transactional {
            let conn = Connection::Mongo {
                db: &self.db,
                session: None,
            };
            return step(code, direction, conn).await;
        }
        let mut session = self.begin().await?;
        let started = std::time::Instant::now();
        let conn = Connection::Mongo {
            db: &self.db,
            session: Some(&mut session),
        };
        let mut result = step(code, direction, conn).await;
        if let (Ok(()), Some((table, change))) = (&result, record) {
            result = self
                .apply_change(
                    table,
                    &change.measured(started.elapsed()),
                    Some(&mut session),
                )
                .await
                .map_err(|e| history_record_failure(&e));
        }
        end(session, result).await
    }

    async fn record(&mut self, table: &str, change: &HistoryChange) -> Result<()> {
        self.apply_change(table, change, None)
            .await
            .map_err(|e| self.error(e))
    }

    async fn drop_all(&mut self, keep: &[String]) -> Result<Vec<String>> {
        let names = self
            .db
            .list_collection_names()
            .await
            .map_err(|e| self.error(e))?;
        let mut dropped = Vec::new();
        for name in names {
            if keep.contains(&name) || name.starts_with("system.") {
                continue;
            }
            self.db
                .collection::<Document>(&name)
                .drop()
                .await
                .map_err(|e| self.error(e))?;
            dropped.push(name);
        }
        dropped.sort();
        Ok(dropped)
    }

    async fn open_lease_store(&mut self, table: &str) -> Result<Box<dyn LeaseStore>> {
        // The driver's client is a pool: the lease store shares it safely with the heartbeat.
        let store = lease::MongoLeaseStore::open(self.db.clone(), table, &self.connection).await?;
        Ok(Box::new(store))
    }

    async fn close(self: Box<Self>) {
        self.client.shutdown().await;
    }
}
