//! MongoDB, on the official driver: the history in a collection (`_id` = version), JSON
//! command migrations run with `runCommand`, and the lease lock (MongoDB has no session
//! lock) in `<history>_lock`.
//!
//! Steps that are not declared `"transaction": true` cannot share a transaction with their
//! record, so they are bracketed by a `running` record, like MySQL's DDL.

use std::time::Duration;

use async_trait::async_trait;
use mongodb::bson::{doc, Document};
use mongodb::error::ErrorKind as MongoErrorKind;
use mongodb::options::ClientOptions;
use mongodb::{Client, ClientSession, Database};

use super::history_tables::{self, Known, Prepared};
use super::{session_label, Backend, BackendKind, Capabilities, ConnectFailure, ConnectRequest};
use super::{Namespaces, Step, StepBody, StepFailure};
use crate::error::{DatabaseError, Error, Result};
use crate::history::{
    AppliedMigration, AppliedRepeatable, HistoryChange, HistoryDigest, RepeatableChange,
};
use crate::lock::{lease_table, LeaseStore, LockHost, LockSupport};
use crate::migration::Direction;
use crate::rust_migration::{Connection, RustMigration};

mod commands;
mod dump;
mod grants;
mod history;
mod lease;
mod repeatables;
mod snapshot;

pub(crate) use commands::CommandDocuments;
pub(crate) use commands::{mongo_code, mongo_message, parse_step as parse_commands};

pub(crate) struct MongoBackend {
    client: Client,
    db: Database,
    connection: String,
    /// The history collection's name, fixed per connection.
    table: String,
    known: Known,
    /// Who the connection authenticates as: the grant a refusal names.
    grantee: grants::Grantee,
}

pub(crate) async fn connect(request: &ConnectRequest) -> Result<Box<dyn Backend>, ConnectFailure> {
    let mut options = ClientOptions::parse(&request.url).await.map_err(|e| {
        // An SRV lookup that failed may succeed once DNS is up.
        let transient = matches!(*e.kind, MongoErrorKind::DnsResolve { .. });
        ConnectFailure::driver(
            format!("invalid MongoDB URL: {}", mongo_message(&e)),
            e,
            transient,
        )
    })?;
    options.app_name = Some(session_label(&request.operation));
    // Fail each attempt quickly; the connector retries up to --connect-timeout.
    let attempt = request
        .connect_timeout
        .clamp(Duration::from_millis(200), Duration::from_secs(2));
    options.server_selection_timeout = Some(attempt);
    // Not `connect_timeout`: the driver also times its server monitor's heartbeat with it,
    // and a heartbeat that times out interrupts the commands in flight. Capped at 2 s, a
    // server slow for a moment aborted the migration running on it (and left it dirty).
    // Selection fails fast on its own when the server is down; the driver's default (10 s)
    // bounds a connection that hangs.
    let Some(database) = options.default_database.clone() else {
        return Err(ConnectFailure::refused(
            "no database name in the URL's path (write it as mongodb://host/app)",
        ));
    };
    let credential = options.credential.as_ref();
    let grantee = grants::Grantee {
        user: credential.and_then(|c| c.username.clone()),
        source: credential.and_then(|c| c.source.clone()),
        database: database.clone(),
    };
    let client = Client::with_options(options)
        .map_err(|e| ConnectFailure::driver(mongo_message(&e), e, false))?;
    let db = client.database(&database);
    if let Err(e) = db.run_command(doc! { "ping": 1 }).await {
        let transient = matches!(
            *e.kind,
            MongoErrorKind::ServerSelection { .. }
                | MongoErrorKind::Io(_)
                | MongoErrorKind::ConnectionPoolCleared { .. }
        );
        return Err(ConnectFailure::driver(mongo_message(&e), e, transient));
    }
    Ok(Box::new(MongoBackend {
        client,
        db,
        connection: request.name.clone(),
        table: request.history_table.clone(),
        known: Known::default(),
        grantee,
    }))
}

/// What a step runs inside (or outside) its transaction.
enum Work<'a> {
    Commands(&'a [Document]),
    Code(&'a dyn RustMigration, Direction),
}

impl MongoBackend {
    fn error(&self, error: mongodb::error::Error) -> Error {
        match self.grantee.refusal(&self.connection, &error) {
            Some(refused) => refused.caused_by(error),
            None => Error::history(&self.connection, mongo_message(&error)).caused_by(error),
        }
    }

    async fn perform(
        &self,
        work: Work<'_>,
        session: Option<&mut ClientSession>,
    ) -> std::result::Result<(), StepFailure> {
        match work {
            Work::Commands(documents) => commands::run(&self.db, documents, session).await,
            Work::Code(code, direction) => {
                let conn = Connection::Mongo {
                    db: &self.db,
                    session,
                };
                match direction {
                    Direction::Up => code.up(conn).await,
                    Direction::Down => code.down(conn).await,
                }
                .map_err(|e| StepFailure::new(DatabaseError::from_rust_migration(e)))
            }
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
        Err(mut failure) => {
            // Aborted whole: nothing of the step stayed, unless the connection went with it.
            let aborted = session.abort_transaction().await.is_ok();
            failure.nothing_changed |= aborted && !failure.error.connection_lost;
            Err(failure)
        }
    }
}

#[async_trait]
impl LockHost for MongoBackend {
    fn lock_support(&self) -> LockSupport {
        BackendKind::Mongo.lock_support()
    }

    async fn lease_store(&mut self, create: bool) -> Result<Option<Box<dyn LeaseStore>>> {
        // The driver's client is a pool: the lease store shares it safely with the heartbeat.
        // Reading a collection that does not exist creates nothing and finds no lease.
        let table = lease_table(&self.table);
        let (db, grantee) = (self.db.clone(), self.grantee.clone());
        let store =
            lease::MongoLeaseStore::open(db, &table, &self.connection, grantee, create).await?;
        Ok(Some(Box::new(store)))
    }
}

#[async_trait]
impl Backend for MongoBackend {
    fn capabilities(&self) -> Capabilities {
        BackendKind::Mongo.capabilities()
    }

    fn lock_host(&mut self) -> &mut dyn LockHost {
        self
    }

    async fn read_history(&mut self) -> Result<Option<Vec<AppliedMigration>>> {
        history_tables::read(self).await
    }

    async fn prepare_history(&mut self) -> Result<Vec<AppliedMigration>> {
        history_tables::prepare(self).await
    }

    async fn prepare_history_expecting(&mut self, expected: &HistoryDigest) -> Result<Prepared> {
        history_tables::prepare_expecting(self, Some(expected)).await
    }

    async fn run(&mut self, step: Step<'_>) -> std::result::Result<(), StepFailure> {
        // What MongoDB cannot do, the engine never asks of it (its capabilities and lock
        // support say so); a step asked anyway is refused rather than run unguarded.
        if step.checks_lock || step.lock_timeout.is_some() || step.resume_at > 0 {
            return Err(StepFailure::refused(
                "MongoDB cannot check a session lock inside a step, bound a table-lock wait, \
                 or resume a step part-way",
            ));
        }
        let work = match step.body {
            StepBody::Text(_, parsed) => match parsed.get::<CommandDocuments>() {
                Some(CommandDocuments(documents)) => Work::Commands(documents),
                // Loading parses every command step it keeps: this one did not come through it.
                None => {
                    return Err(StepFailure::refused(
                        "the step's commands were not parsed when the migrations were loaded",
                    ))
                }
            },
            StepBody::Code(code, direction) => Work::Code(code, direction),
        };
        if !step.transactional && step.record.is_none() {
            return self.perform(work, None).await;
        }
        let started = std::time::Instant::now();
        let mut session = self.begin().await?;
        let mut result = self.perform(work, Some(&mut session)).await;
        if let (Ok(()), Some(change)) = (&result, step.record) {
            // Measured once the step ran, inside the transaction the record commits with.
            let change = change.measured(started.elapsed());
            result = self
                .apply_change(&change, Some(&mut session))
                .await
                .map_err(|e| history_record_failure(&e));
        }
        end(session, result).await
    }

    async fn read_repeatables(&mut self) -> Result<Vec<AppliedRepeatable>> {
        self.read_repeatable_records().await
    }

    async fn record_repeatable(&mut self, change: &RepeatableChange) -> Result<()> {
        self.write_repeatable_record(change).await
    }

    async fn record(&mut self, changes: &[HistoryChange]) -> Result<()> {
        // One at a time: outside a replica set there are no transactions to group them in.
        for change in changes {
            self.apply_change(change, None)
                .await
                .map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    async fn drop_all(&mut self) -> Result<Vec<String>> {
        // The history goes too: look again before using it.
        self.known.forget();
        let keep = lease_table(&self.table);
        let names = self
            .db
            .list_collection_names()
            .await
            .map_err(|e| self.error(e))?;
        let mut dropped = Vec::new();
        for name in names {
            if name == keep || name.starts_with("system.") {
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

    async fn read_schema(&mut self) -> Result<Vec<crate::schema::SchemaObject>> {
        self.dump_objects().await
    }

    fn keeps_snapshots(&self) -> bool {
        true
    }

    async fn read_snapshot(&mut self) -> Result<Option<crate::schema::StoredSnapshot>> {
        self.read_stored_snapshot().await
    }

    async fn write_snapshot(&mut self, snapshot: &crate::schema::StoredSnapshot) -> Result<()> {
        self.write_stored_snapshot(snapshot).await
    }

    async fn forget_snapshot(&mut self) -> Result<()> {
        self.forget_stored_snapshot().await
    }

    async fn list_namespaces(&mut self, what: Namespaces) -> Result<Vec<String>> {
        if what == Namespaces::Schemas {
            return Err(Error::config(
                "MongoDB has no schemas: use --databases, or name the targets in a file (--targets)",
            ));
        }
        let mut names = (self.client.list_database_names().await).map_err(|e| self.error(e))?;
        names.retain(|name| !matches!(name.as_str(), "admin" | "local" | "config"));
        names.sort();
        Ok(names)
    }

    async fn close(self: Box<Self>) {
        self.client.shutdown().await;
    }
}
