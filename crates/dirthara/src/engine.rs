//! The engine: the one place that decides *when* things happen. Every command — from the
//! library or the CLI — runs through [`Migrator`], so there is exactly one apply loop.
//!
//! A locked command goes: load and validate migrations (no I/O on the database) → resolve
//! the lock strategy (refusing SQLite-with-locking before connecting) → connect the history
//! connection → take the lock → read the history → plan → run each step, confirming the lock
//! before each → release the lock on every path, attaching a release failure to the primary
//! error instead of replacing it.
//!
//! Files: the locked commands are in `engine/commands.rs` (and `drift.rs`, `squash.rs`), each
//! run as a `Session` (`engine/session.rs`: connect, lock, the apply loop, release) whose
//! migrations run one by one in `step.rs`; `preview.rs` and `inspect.rs` only look.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

use crate::backend::{Backend, BackendKind, ConnectRequest, Connector, UrlConnector};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::events::EventSink;
use crate::lock::resolve_strategy;
use crate::migration::{DownSteps, Migration};
use crate::plan::PlanOptions;
use crate::rust_migration::RustMigration;

/// Runs migrations. Cheap to build; every operation opens and closes its own connections.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), dirthara::Error> {
/// use dirthara::{Config, Migrator};
///
/// let mut config = Config::with_url("postgres://app@db/app");
/// config.directories = vec!["migrations".into()];
/// let report = Migrator::new(config).migrate().await?;
/// println!("applied {} migration(s)", report.applied.len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Migrator {
    config: Config,
    events: EventSink,
    connector: Arc<dyn Connector>,
    /// Migrations given in code; shared, so that loading on another thread copies nothing.
    extra: Arc<Vec<Migration>>,
    /// Rust migrations by version; `extra` holds their planner records.
    code: BTreeMap<i64, Arc<dyn RustMigration>>,
    shutdown: Option<watch::Receiver<bool>>,
    /// Migrations already loaded and validated, with the down steps said (a fleet loads its
    /// files once for every target): used instead of loading again.
    preloaded: Option<(DownSteps, Arc<Vec<Migration>>)>,
    /// PostgreSQL: the schema the history connection works in (a fleet target's), its
    /// `search_path`; `None`: the connection's own.
    schema: Option<String>,
    /// PostgreSQL: the schemas after `schema` on its `search_path` (`[fleet] search_path`).
    shared_schemas: Vec<String>,
    /// The fleet target this migrator runs on, by name (`${dirthara:target}`).
    target: Option<String>,
    /// The connections' kinds, already read from their URLs (a fleet reads each target's
    /// once): used instead of reading them again.
    parsed: Option<Connections>,
}

impl Migrator {
    /// A migrator for `config`, with no events and no migrations beyond the configured
    /// directories. Nothing is read or connected until a command runs.
    pub fn new(config: Config) -> Self {
        Migrator {
            config,
            events: EventSink::discard(),
            connector: Arc::new(UrlConnector),
            extra: Arc::new(Vec::new()),
            code: BTreeMap::new(),
            shutdown: None,
            preloaded: None,
            schema: None,
            shared_schemas: Vec::new(),
            target: None,
            parsed: None,
        }
    }

    /// Adds a migration written in Rust (see [`RustMigration`]), ordered by version among
    /// the file migrations.
    pub fn with_rust_migration(mut self, migration: impl RustMigration + 'static) -> Self {
        Arc::make_mut(&mut self.extra).push(crate::rust_migration::describe(&migration));
        self.code.insert(migration.version(), Arc::new(migration));
        self
    }

    /// Receives every [`Event`](crate::Event) as it happens.
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara::{EventKind, EventSink};
    ///
    /// let sink = EventSink::new(|event| {
    ///     if let EventKind::MigrationFinished { version, duration, .. } = &event.kind {
    ///         let took = dirthara::format_duration(*duration);
    ///         eprintln!("{}: migrated {version} in {took}", dirthara::format_timestamp(event.at));
    ///     }
    /// });
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("sqlite:app.db"))
    ///     .with_events(sink);
    /// ```
    pub fn with_events(mut self, events: EventSink) -> Self {
        self.events = events;
        self
    }

    /// Adds migrations defined in code (or embedded with `embed_migrations!`), merged with
    /// those of the configured directories.
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara::Migration;
    ///
    /// let mut config = dirthara::Config::with_url("sqlite:app.db");
    /// config.directories.clear();
    /// let migrator = dirthara::Migrator::new(config).with_migrations([
    ///     Migration::new(1, "create_users", "CREATE TABLE users (id INT)")
    ///         .with_down("DROP TABLE users"),
    /// ]);
    /// assert_eq!(migrator.load().unwrap().len(), 1);
    /// ```
    pub fn with_migrations(mut self, migrations: impl IntoIterator<Item = Migration>) -> Self {
        Arc::make_mut(&mut self.extra).extend(migrations);
        self
    }

    /// When the receiver turns `true`, the running step finishes and is recorded, and the
    /// command stops with `INTERRUPTED` before the next one.
    ///
    /// # Examples
    ///
    /// ```
    /// let (stop, shutdown) = tokio::sync::watch::channel(false);
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("sqlite:app.db"))
    ///     .with_shutdown(shutdown);
    /// // On SIGTERM: `stop.send(true)`.
    /// # drop(stop);
    /// ```
    pub fn with_shutdown(mut self, shutdown: watch::Receiver<bool>) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// Replaces how connections are opened (the engine's own tests).
    #[cfg(test)]
    pub(crate) fn with_connector(mut self, connector: Arc<dyn Connector>) -> Self {
        self.connector = connector;
        self
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where its events go.
    pub(crate) fn events(&self) -> &EventSink {
        &self.events
    }

    /// Whether a shutdown signal has come.
    pub(crate) fn stopped(&self) -> bool {
        self.shutdown.as_ref().is_some_and(|rx| *rx.borrow())
    }

    /// The same migrator for one target of a fleet: another configuration, its own events
    /// (naming the target) and, on PostgreSQL, the target's `search_path`: its schema first,
    /// then the shared ones.
    pub(crate) fn for_target(
        &self,
        target: &str,
        config: Config,
        events: EventSink,
        search_path: Option<Vec<String>>,
        connections: Connections,
    ) -> Self {
        let mut search_path = search_path.unwrap_or_default().into_iter();
        Migrator {
            config,
            events,
            target: Some(target.to_string()),
            schema: search_path.next(),
            shared_schemas: search_path.collect(),
            parsed: Some(connections),
            ..self.clone()
        }
    }

    /// Uses `migrations`, loaded and validated with `downs`, instead of loading again.
    pub(crate) fn with_preloaded(
        mut self,
        downs: DownSteps,
        migrations: Arc<Vec<Migration>>,
    ) -> Self {
        self.preloaded = Some((downs, migrations));
        self
    }

    /// The migrations a command runs with: the preloaded ones when they have the down steps
    /// it needs, else loaded now.
    fn migrations(
        &self,
        downs: DownSteps,
        connections: &Connections,
    ) -> Result<Arc<Vec<Migration>>> {
        let loaded = match &self.preloaded {
            Some((loaded, migrations)) if *loaded == DownSteps::Read || *loaded == downs => {
                Arc::clone(migrations)
            }
            _ => Arc::new(self.load_steps(downs, connections)?),
        };
        self.fill_placeholders(loaded, connections)
    }

    fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            strict: self.config.strict,
        }
    }

    /// Each named connection's kind of database, from its URL: parsed once per command.
    pub(crate) fn connections(&self) -> Connections {
        if let Some(parsed) = &self.parsed {
            return parsed.clone();
        }
        let kinds = (self.config.connections.iter())
            .map(|(name, url)| (name.clone(), crate::backend::kind_of(url)))
            .collect();
        Connections { kinds }
    }

    /// Validates the configuration — once per command — and returns the history
    /// connection's kind of database.
    fn checked(&self, connections: &Connections) -> Result<BackendKind> {
        self.config.validate()?;
        connections.kind(&self.config.history_connection)
    }

    /// Gives up `work` at once when a shutdown signal arrives. For what happens before the
    /// lock is held (connecting, retrying a database that is not up yet, loading files):
    /// nothing is held and nothing was changed, so there is nothing to finish first.
    async fn unless_stopped<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        let Some(shutdown) = &self.shutdown else {
            return work.await;
        };
        let mut signal = shutdown.clone();
        let stopped = async move {
            // A dropped sender never signals: wait for ever rather than stop.
            if signal.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            // A signal that already came wins over work that is ready too.
            biased;
            () = stopped => Err(Error::interrupted_before_lock()),
            done = work => done,
        }
    }

    async fn connect(
        &self,
        connections: &Connections,
        name: &str,
        operation: &str,
        read_only: bool,
    ) -> Result<Box<dyn Backend>> {
        let request = self.connect_request(connections, name, operation, read_only)?;
        self.unless_stopped(self.connector.connect(&request, &self.events))
            .await
    }

    /// What opening the connection `name` asks of the connector: retried up to
    /// `connect_timeout`, as configured.
    fn connect_request(
        &self,
        connections: &Connections,
        name: &str,
        operation: &str,
        read_only: bool,
    ) -> Result<ConnectRequest> {
        let url = self.config.connection_url(name)?.to_string();
        Ok(ConnectRequest {
            name: name.to_string(),
            kind: connections.kind(name)?,
            url,
            operation: operation.to_string(),
            connect_timeout: self.config.connect_timeout,
            read_only,
            init_sql: self.config.init_sql.get(name).cloned(),
            history_table: self.config.history_table.clone(),
            schema: (name == self.config.history_connection)
                .then(|| self.schema.clone())
                .flatten(),
            shared_schemas: match name == self.config.history_connection {
                true => self.shared_schemas.clone(),
                false => Vec::new(),
            },
        })
    }

    /// The history connection, read-only, for finding a fleet's targets there.
    pub(crate) async fn connect_for_listing(&self) -> Result<Box<dyn Backend>> {
        let connections = self.connections();
        self.checked(&connections)?;
        self.connect_history(&connections, "fleet").await
    }

    /// Loads and validates the migrations once, for a fleet's targets of this migrator's kind
    /// of database (see [`Migrator::with_preloaded`]), their placeholders left for each
    /// target to fill with its own values.
    pub(crate) fn preload(&self, downs: DownSteps) -> Result<Arc<Vec<Migration>>> {
        let connections = self.connections();
        self.checked(&connections)?;
        self.load_steps(downs, &connections).map(Arc::new)
    }

    /// Gives the history connection back when a command is done with it: `reusable` when the
    /// command ended well (and released its lock cleanly). A fleet's connector keeps such a
    /// connection for its next target; otherwise it is closed.
    pub(crate) async fn release_history(&self, history: Box<dyn Backend>, reusable: bool) {
        match self.config.connection_url(&self.config.history_connection) {
            Ok(url) => self.connector.release(url, history, reusable).await,
            Err(_) => history.close().await,
        }
    }

    /// How it opens connections.
    pub(crate) fn connector(&self) -> Arc<dyn Connector> {
        Arc::clone(&self.connector)
    }

    /// Uses `connector` to open connections (a fleet's, which keeps clean ones for the next
    /// target).
    pub(crate) fn with_shared_connector(mut self, connector: Arc<dyn Connector>) -> Self {
        self.connector = connector;
        self
    }

    /// The history connection for a command that only reads (status, preview, unlock).
    async fn connect_history(
        &self,
        connections: &Connections,
        operation: &str,
    ) -> Result<Box<dyn Backend>> {
        self.connect(
            connections,
            &self.config.history_connection,
            operation,
            true,
        )
        .await
    }

    /// Loads the migrations and connects the history connection, for a command that takes
    /// the lock. Loading touches no database, and a run that cannot be locked (SQLite with
    /// `locking = true`) is refused before connecting. On a database server the connection
    /// is opened while the files are read (connecting changes nothing; the lock is taken only
    /// once every file loaded): a no-op `migrate` then costs the slower of the two, not both.
    /// A failure to load wins over a failure to connect, as if one came after the other, and
    /// is returned as soon as it is known, without waiting for the connection attempt.
    /// With `runs_steps`, every connection a migration names must have a URL too.
    async fn load_and_connect(
        &self,
        connections: &Connections,
        operation: &str,
        downs: DownSteps,
        runs_steps: bool,
    ) -> Result<(Arc<Vec<Migration>>, Box<dyn Backend>)> {
        let kind = self.checked(connections);
        // What the URL's kind of database promises; the server it reaches may offer less,
        // which the session finds out once connected.
        let lockable = |kind: BackendKind| {
            resolve_strategy(self.config.locking, kind.lock_support())
                .map(|_| ())
                .map_err(|refused| refused.into_error(&self.config.history_connection))
        };
        let connection = self.config.history_connection.as_str();
        match kind.as_ref().map(|&kind| (kind, lockable(kind))) {
            Ok((kind, Ok(()))) if kind.is_server() && self.preloaded.is_none() => {
                let loader = self.clone();
                let loading = async {
                    let kinds = connections.clone();
                    let loaded = tokio::task::spawn_blocking(move || {
                        let loaded = Arc::new(loader.load_steps(downs, &kinds)?);
                        loader.fill_placeholders(loaded, &kinds)
                    });
                    let loaded = self.unless_stopped(async {
                        loaded.await.unwrap_or_else(|panicked| {
                            std::panic::resume_unwind(panicked.into_panic())
                        })
                    });
                    let available = loaded.await?;
                    if runs_steps {
                        self.check_connections(&available)?;
                    }
                    Ok(available)
                };
                let connecting = self.connect(connections, connection, operation, false);
                tokio::pin!(loading, connecting);
                // A file that fails to load is reported at once: the connection attempt
                // (which may be retrying an unreachable server for `--connect-timeout`)
                // is dropped rather than waited for.
                let (loaded, connected) = tokio::select! {
                    loaded = &mut loading => match loaded {
                        Err(error) => return Err(error),
                        Ok(available) => (Ok(available), connecting.await),
                    },
                    connected = &mut connecting => (loading.await, connected),
                };
                match (loaded, connected) {
                    (Ok(available), Ok(history)) => Ok((available, history)),
                    (Err(error), Ok(history)) => {
                        history.close().await;
                        Err(error)
                    }
                    (Err(error), Err(_)) | (Ok(_), Err(error)) => Err(error),
                }
            }
            // One after the other, in the order the errors are reported: the files, the
            // configuration, the connections the files name, the lock, the connection.
            _ => {
                let available = self.migrations(downs, connections)?;
                let kind = kind?;
                if runs_steps {
                    self.check_connections(&available)?;
                }
                lockable(kind)?;
                let history = self
                    .connect(connections, connection, operation, false)
                    .await?;
                Ok((available, history))
            }
        }
    }
}

/// Each named connection's kind of database, parsed from its URL once per command.
#[derive(Debug, Clone)]
pub(crate) struct Connections {
    kinds: BTreeMap<String, Result<BackendKind>>,
}

impl Connections {
    /// These connections, with `name`'s URL (a fleet target's) read as `kind`.
    pub(crate) fn with(mut self, name: &str, kind: Result<BackendKind>) -> Self {
        self.kinds.insert(name.to_string(), kind);
        self
    }

    /// The kind of database connection `name` reaches; an error for a URL that names none,
    /// or for a connection without a URL.
    pub(crate) fn kind(&self, name: &str) -> Result<BackendKind> {
        match self.kinds.get(name) {
            Some(kind) => kind.clone(),
            None => Err(Error::config(format!("connection `{name}` has no URL"))),
        }
    }

    /// The kinds of the connections whose URL names one.
    pub(crate) fn known(&self) -> impl Iterator<Item = (&str, BackendKind)> {
        (self.kinds.iter()).filter_map(|(name, kind)| Some((name.as_str(), *kind.as_ref().ok()?)))
    }
}

mod attempts;
mod blocking;
mod bracket;
mod commands;
mod drift;
mod dump;
mod inspect;
mod lint;
mod load;
mod placeholders;
mod preview;
mod repeatables;
mod session;
mod snapshot;
mod squash;
mod step;
mod wait;

pub use drift::{DriftReference, DriftReport};
pub use lint::{LintAgainst, LintReport};
pub use squash::SquashReport;
pub use wait::{WaitFor, WaitReport};

#[cfg(test)]
mod tests;
