//! Backends: *how* to talk to each database. The engine decides *when*.
//!
//! A backend reads and writes the history, runs a step (alone, or atomically with its
//! history change where the database allows), drops everything for `fresh`, and — if the
//! database has one — offers a session lock. The SQL backends share all history logic in
//! `sql`; each driver module only says how to execute text and read rows.

use async_trait::async_trait;

use crate::blocking::TableSize;
use crate::error::{DatabaseError, Error, Result};
use crate::history::{
    AppliedMigration, AppliedRepeatable, HistoryChange, HistoryDigest, RepeatableChange,
};
use crate::lock::LockHost;
use crate::migration::{Direction, ParsedStep};
use crate::rust_migration::RustMigration;

#[cfg(test)]
pub(crate) mod memory;
#[cfg(feature = "mongodb")]
mod mongo;
#[cfg(all(test, feature = "mongodb"))]
pub(crate) use mongo::CommandDocuments;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod servers;
#[cfg(sql)]
pub(crate) mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(sql)]
mod sqlx_error;

mod connect;
mod history_tables;
mod reading;
mod reuse;
#[cfg(any_backend)]
pub(crate) use connect::ConnectFailure;
#[cfg(sql)]
pub(crate) use connect::{connect_failure, run_init_sql};
pub(crate) use connect::{ConnectRequest, Connector, UrlConnector};
pub(crate) use history_tables::Prepared;
pub(crate) use reading::read_steps;
pub(crate) use reuse::ReusingConnector;
#[cfg(sql)]
pub(crate) use sql::{database_message, DriverError};

/// A JSON command step as MongoDB will run it, parsed once, at load ([`StepBody::Text`]);
/// `Err` why it does not parse. Without the MongoDB driver nothing is parsed: no JSON
/// migration can run, and connecting says so.
pub(crate) fn parse_commands(text: &str) -> std::result::Result<ParsedStep, String> {
    #[cfg(feature = "mongodb")]
    return mongo::parse_commands(text);
    #[cfg(not(feature = "mongodb"))]
    {
        let _ = text;
        Ok(ParsedStep::default())
    }
}

pub(crate) use crate::kind::{BackendKind, Capabilities};

/// The kind of database `url` points at, by its scheme (the kind table in `dirthara-core`).
pub(crate) fn kind_of(url: &str) -> Result<BackendKind> {
    let scheme = url.split(':').next().unwrap_or_default();
    let kind = BackendKind::from_scheme(scheme);
    // `postgres:name` is read by some drivers as a database name they then quote back in
    // their errors: a server URL without `//` is refused before any driver sees it.
    if kind.is_some_and(BackendKind::is_server) && !url[scheme.len()..].starts_with("://") {
        let scheme = scheme.to_ascii_lowercase();
        return Err(Error::config(format!(
            "`{}`: a {scheme} URL starts with `{scheme}://`, e.g. `{scheme}://user@host/database`",
            crate::redact::redact_url(url)
        )));
    }
    kind.ok_or_else(|| {
        let schemes: Vec<String> = (BackendKind::ALL.iter())
            .flat_map(|&kind| kind.facts().schemes.iter().map(move |s| (kind, *s)))
            .map(|(kind, scheme)| match kind.is_server() {
                true => format!("{scheme}://"),
                false => format!("{scheme}:"),
            })
            .collect();
        let (last, rest) = schemes.split_last().expect("the kind table is not empty");
        Error::config(format!(
            "{}: unknown database URL scheme; use {} or {last}",
            match crate::redact::redact_url(url) {
                // Not a URL at all: perhaps a password pasted in its place.
                shown if shown == "***" => "a database URL that is not a URL (not shown, in \
                                            case it is a secret)"
                    .to_string(),
                shown => format!("`{shown}`"),
            },
            rest.join(", ")
        ))
    })
}

/// Opens one connection of `request`'s kind: the one place a new backend is wired in.
async fn connect_once(
    request: &ConnectRequest,
) -> std::result::Result<Box<dyn Backend>, ConnectFailure> {
    match request.kind {
        #[cfg(feature = "sqlite")]
        BackendKind::Sqlite => sqlite::connect(request).await,
        #[cfg(feature = "postgres")]
        BackendKind::Postgres => postgres::connect(request).await,
        #[cfg(feature = "mysql")]
        BackendKind::Mysql => mysql::connect(request).await,
        #[cfg(feature = "mongodb")]
        BackendKind::Mongo => mongo::connect(request).await,
        #[cfg(not(feature = "mongodb"))]
        BackendKind::Mongo => Err(not_built("mongodb")),
        #[cfg(not(feature = "sqlite"))]
        BackendKind::Sqlite => Err(not_built("sqlite")),
        #[cfg(not(feature = "postgres"))]
        BackendKind::Postgres => Err(not_built("postgres")),
        #[cfg(not(feature = "mysql"))]
        BackendKind::Mysql => Err(not_built("mysql")),
        // The in-memory backend of the engine's tests, which connect it themselves; a kind
        // a newer dirthara-core knows and this engine does not.
        other => Err(not_built(other.name())),
    }
}

/// A URL whose backend this build leaves out.
fn not_built(feature: &str) -> ConnectFailure {
    ConnectFailure::refused(format!(
        "this build of dirthara was compiled without the `{feature}` feature"
    ))
}

/// A connection to one named database, as the engine uses it. The history table (and the
/// schema or database it lives in) is fixed when the connection opens.
#[async_trait]
pub(crate) trait Backend: LockHost + Send {
    /// What this database can do.
    fn capabilities(&self) -> Capabilities;

    /// The connection as the lock sees it (the same value, narrowed).
    fn lock_host(&mut self) -> &mut dyn LockHost;

    /// The history, or `None` when this database has none yet. Never creates anything, and
    /// refuses a history layout newer than this build understands.
    async fn read_history(&mut self) -> Result<Option<Vec<AppliedMigration>>>;

    /// Creates the history (or upgrades an older layout) and returns its records (none when
    /// it was just created). Called under the lock.
    async fn prepare_history(&mut self) -> Result<Vec<AppliedMigration>>;

    /// As [`Backend::prepare_history`]; but when the history's digest is `expected`, says
    /// so ([`Prepared::AsExpected`]) without reading the records: how `migrate` finds that
    /// it has nothing to do without shipping the history.
    async fn prepare_history_expecting(&mut self, expected: &HistoryDigest) -> Result<Prepared>;

    /// The records of the repeatable migrations ([`AppliedRepeatable`]); none when there is
    /// no such table (collection) yet. Never creates anything.
    async fn read_repeatables(&mut self) -> Result<Vec<AppliedRepeatable>>;

    /// Writes `change` to the repeatables' records, creating their table (collection) first
    /// when it is missing. Called under the lock.
    async fn record_repeatable(&mut self, change: &RepeatableChange) -> Result<()>;

    /// Runs a step — in a transaction of its own if `step.transactional`, and together with
    /// `step.record` when given, so that both commit or neither does. After a failure the
    /// session is clean again (any transaction block the step left open is rolled back), so
    /// the next statement dirthara sends is not refused because of the step.
    async fn run(&mut self, step: Step<'_>) -> Result<(), StepFailure>;

    /// Whether the transaction `blocker` held a step's table lock with (named while the step
    /// waited) has ended; asked on a connection of its own while the step pauses between
    /// attempts. `None` when that cannot be said.
    async fn blocker_gone(&mut self, _blocker: &crate::events::Blocker) -> Option<bool> {
        None
    }

    /// Applies history changes in order, all or none, in one round trip where the database
    /// allows (one commit instead of one per change).
    async fn record(&mut self, changes: &[HistoryChange]) -> Result<()>;

    /// As [`Backend::record`], but the last change (a step's `running` marker) is written
    /// only if this session still holds the session lock, asked in the same message; `false`
    /// when it does not (the other changes are written, the last is not). Asked only of a
    /// backend whose session lock [`verifies_in_marker`](crate::lock::SessionLock::verifies_in_marker).
    async fn record_guarded(&mut self, _changes: &[HistoryChange]) -> Result<bool> {
        unreachable!("only a session lock that verifies in the marker is asked to")
    }

    /// Drops every table/view of this database except the lease table (a lease may be what
    /// protects this very run); returns what it dropped. Must not end the session (the
    /// session lock lives in it).
    async fn drop_all(&mut self) -> Result<Vec<String>>;

    /// Reads `columns` of `table` in the connection's current schema, every value as text
    /// (`None`: NULL), ordered by `order_by`; `None` when there is no such table. How
    /// `baseline --from` reads another tool's history: never used to change anything.
    async fn read_table(
        &mut self,
        _table: &str,
        _columns: &[&str],
        _order_by: &str,
    ) -> Result<Option<Vec<Vec<Option<String>>>>> {
        Err(Error::config(format!(
            "`baseline --from` reads a SQL table, but the history connection is {}; adopt on \
             the SQL database the other tool used",
            self.capabilities().database
        )))
    }

    /// The schemas of this database (PostgreSQL) or the databases of its server, system ones
    /// left out, in name order: the targets a fleet can be told to find (`--schemas`,
    /// `--databases`).
    async fn list_namespaces(&mut self, what: Namespaces) -> Result<Vec<String>> {
        Err(Error::config(format!(
            "{} has no {} to list; name the targets in a file (--targets) instead",
            self.capabilities().database,
            what.plural()
        )))
    }

    /// The schema of the connection's database (on PostgreSQL, of its schema), read from the
    /// catalog, dirthara's own tables left out: what `dump` prints. Reads, never writes.
    async fn read_schema(&mut self) -> Result<Vec<crate::schema::SchemaObject>> {
        Err(Error::config(format!(
            "`dump` reads a schema from a SQL database or MongoDB, not from {}",
            self.capabilities().database
        )))
    }

    /// What `squash` needs beyond [`Backend::read_schema`] to write the schema as statements
    /// that run: the dependencies between its objects the catalog records, and the schema
    /// name the server writes into definitions (PostgreSQL). Reads, never writes.
    async fn baseline_facts(&mut self) -> Result<crate::schema::BaselineFacts> {
        Ok(crate::schema::BaselineFacts::default())
    }

    /// Whether this database keeps a schema snapshot (`<history>_schema`) for `drift`: every
    /// one whose schema `dump` reads.
    fn keeps_snapshots(&self) -> bool {
        false
    }

    /// The schema snapshot kept beside the history; `None` when none was taken yet. Never
    /// creates anything.
    async fn read_snapshot(&mut self) -> Result<Option<crate::schema::StoredSnapshot>> {
        Ok(None)
    }

    /// Removes the schema snapshot, if one is kept (`schema_snapshot = off`: a command that
    /// changed the schema without taking one leaves none that is stale). Creates nothing.
    /// Called under the lock.
    async fn forget_snapshot(&mut self) -> Result<()> {
        Ok(())
    }

    /// Replaces the schema snapshot, creating its table (collection) first when it is
    /// missing. Called under the lock.
    async fn write_snapshot(&mut self, _snapshot: &crate::schema::StoredSnapshot) -> Result<()> {
        Err(Error::config(format!(
            "{} keeps no schema snapshot",
            self.capabilities().database
        )))
    }

    /// Runs a query someone wrote to list a fleet's targets (`--targets-sql`), every value as
    /// text (`None`: NULL).
    async fn query_text(&mut self, _sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        Err(Error::config(format!(
            "--targets-sql runs SQL, but the default connection is {}; name the targets in a \
             file (--targets) instead",
            self.capabilities().database
        )))
    }

    /// Makes this open connection, which ended a command cleanly, the session a new
    /// connection for `request` would be (another schema or history table, the same server):
    /// everything a command or its migrations left in the session is discarded, and the
    /// session is set up afresh. `Ok(false)` when it cannot be (the caller then opens a new
    /// connection); an error leaves it fit only to be closed.
    async fn reopen(&mut self, _request: &ConnectRequest) -> Result<bool> {
        Ok(false)
    }

    /// The server's version as it reports it (PostgreSQL's `version()`, MySQL's and
    /// MariaDB's `VERSION()`), where what its statements do depends on it.
    fn server_version(&self) -> Option<&str> {
        None
    }

    /// The size of each of `tables` (named as a migration names them), from the catalog;
    /// `None` for one it does not have. Never changes anything.
    async fn table_sizes(&mut self, tables: &[String]) -> Result<Vec<Option<TableSize>>> {
        Ok(vec![None; tables.len()])
    }

    /// Asks the server whether a statement a rule flagged really rewrites or copies its table,
    /// by rehearsing it on an empty copy ([`dirthara_ddl::Rehearsal`]): `Some(true)` it does,
    /// `Some(false)` the server ran it online, `None` it could not tell (the copy could not
    /// be made, the statement failed on it for another reason). Leaves nothing behind.
    async fn rehearse(&mut self, _rehearsal: &dirthara_ddl::Rehearsal) -> Option<bool> {
        None
    }

    /// Closes the connection (releasing any session state).
    async fn close(self: Box<Self>);
}

/// What [`Backend::list_namespaces`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Namespaces {
    /// The schemas of the connection's database (PostgreSQL).
    Schemas,
    /// The databases on the connection's server.
    Databases,
}

impl Namespaces {
    pub(crate) fn plural(self) -> &'static str {
        match self {
            Namespaces::Schemas => "schemas",
            Namespaces::Databases => "databases",
        }
    }
}

/// One step for [`Backend::run`].
#[derive(Clone, Copy)]
pub(crate) struct Step<'a> {
    pub body: StepBody<'a>,
    /// Run in a transaction of its own (implied when `record` is given).
    pub transactional: bool,
    /// The history change that commits with the step, where the database allows.
    pub record: Option<&'a HistoryChange>,
    /// The step carries the session-lock check ([`LockCheck::InStep`](crate::lock::LockCheck)):
    /// it fails, rolled back, unless this session still holds the lock. Only with `record`.
    pub checks_lock: bool,
    /// The longest a statement of the step may wait for a table (or metadata) lock before it
    /// gives way, failing with [`DatabaseError::lock_not_available`]; `None`: as long as it
    /// takes (and, for a backend without table locks, always).
    pub lock_timeout: Option<std::time::Duration>,
    /// For a step sent statement by statement: the statement to start at (0-based). The
    /// ones before it ran and committed in an earlier attempt that gave way at this one.
    pub resume_at: usize,
}

/// What a step runs: text in the database's language, or a Rust migration's code.
#[derive(Clone, Copy)]
pub(crate) enum StepBody<'a> {
    /// The step's text, and what loading parsed it into for this database where sending it
    /// takes more than the tokenizer's split (a MySQL `DELIMITER` script's statements, a JSON
    /// command file's documents): the backend sends that, and does not parse the text again.
    Text(
        // Only a SQL backend sends the text itself; MongoDB sends what loading parsed.
        #[cfg_attr(not(any(sql, test)), allow(dead_code))] &'a str,
        &'a ParsedStep,
    ),
    Code(&'a dyn RustMigration, Direction),
}

/// A step that failed, as the backend saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepFailure {
    /// Boxed: a failure is rare, and a large `Err` would widen every step's `Result`.
    pub error: Box<DatabaseError>,
    /// Nothing of the step stayed: it was refused before it could change anything (a MongoDB
    /// command answering `ok: 0` as the first of its migration), its first statement failed
    /// and undid itself, or its transaction was rolled back whole. No `running` marker needs
    /// to stay behind. False whenever that is not known (a lost connection).
    pub nothing_changed: bool,
    /// For a step sent statement by statement: the statement that failed (0-based, in the
    /// whole step), where an attempt that gave way would resume.
    pub statement: Option<usize>,
}

impl StepFailure {
    /// A failure where the step may have changed something.
    pub(crate) fn new(error: DatabaseError) -> Self {
        StepFailure {
            error: Box::new(error),
            nothing_changed: false,
            statement: None,
        }
    }

    /// Refused before anything ran.
    pub(crate) fn refused(message: impl Into<String>) -> Self {
        StepFailure {
            nothing_changed: true,
            ..StepFailure::new(DatabaseError::from_message(message))
        }
    }
}

/// `dirthara <operation> <host>:<pid>`: how our sessions describe themselves to the server.
#[cfg(any(feature = "postgres", feature = "mongodb"))]
pub(crate) fn session_label(operation: &str) -> String {
    label_of(
        operation,
        &dirthara_core::host::hostname(),
        std::process::id(),
    )
}

#[cfg(any(feature = "postgres", feature = "mongodb", test))]
fn label_of(operation: &str, host: &str, pid: u32) -> String {
    let mut label = format!("dirthara {operation} {host}:{pid}");
    // PostgreSQL truncates application_name at 63 bytes; a host name may hold multi-byte text.
    dirthara_core::text::truncate_at_char_boundary(&mut label, 63);
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_schemes_select_backends() {
        assert_eq!(kind_of("postgresql://x/y").unwrap(), BackendKind::Postgres);
        assert_eq!(kind_of("mariadb://x/y").unwrap(), BackendKind::Mysql);
        assert_eq!(kind_of("sqlite::memory:").unwrap(), BackendKind::Sqlite);
        let err = kind_of("oracle://u:pw@x/y").unwrap_err();
        assert_eq!(err.code(), crate::Code::ConfigError);
        assert!(!err.to_string().contains("pw"));
        let err = kind_of("hunter2").unwrap_err().to_string();
        assert!(
            err.contains("not a URL (not shown") && !err.contains("hunter2"),
            "{err}"
        );
        // A driver would read `PASSWORD` as a database name, and quote it back.
        let err = kind_of("postgres:PASSWORD").unwrap_err().to_string();
        assert!(
            err.contains("starts with `postgres://`") && !err.contains("PASSWORD"),
            "{err}"
        );
    }

    #[test]
    fn a_session_label_with_a_multi_byte_host_name_is_cut_between_characters() {
        // `dirthara migrate x` is 18 bytes and `ü` 2: byte 63 falls inside a character.
        let host = format!("x{}", "ü".repeat(40));
        let label = label_of("migrate", &host, 4242);
        assert!(label.len() <= 63, "{label}");
        assert!(format!("dirthara migrate {host}:4242").starts_with(&label));
        assert_eq!(label_of("up", "db1", 7), "dirthara up db1:7");
    }
}
